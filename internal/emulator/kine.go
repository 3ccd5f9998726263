package emulator

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Kine is k3s' etcd API over SQLite, built from the kine module pinned in
// tools/kine: the datastore the etcd-API source backs up.
const Kine Kind = "kine"

// KineOptions for StartKine. The zero value serves plain http over a
// SQLite database in a new temporary directory.
type KineOptions struct {
	// Dir holds the SQLite database (state.db); "" means a new temporary
	// directory, removed by Stop.
	Dir string
	// CA, Cert and Key, when set, serve clients over https with Cert (for
	// 127.0.0.1) and require client certificates CA signed.
	CA, Cert, Key string
	// Datastore is kine's --endpoint (a Postgres server's Endpoint); "":
	// SQLite in Dir.
	Datastore string
}

// KineServer is what a client of kine needs.
type KineServer struct {
	// ClientURL serves etcd's API.
	ClientURL string
	// Database is the SQLite file (without KineOptions.Datastore).
	Database string

	o KineOptions
}

// StartKine starts kine over SQLite on a free loopback port and waits
// until it serves.
func StartKine(ctx context.Context, o KineOptions) (*Server, error) {
	s, err := prepare(Kine, Options{Dir: o.Dir})
	if err != nil {
		return nil, err
	}
	s.KineServer = &KineServer{Database: filepath.Join(s.dir, "state.db"), o: o}
	if err := s.run(ctx, Options{Dir: o.Dir}); err != nil {
		return nil, err
	}
	return s, nil
}

// RequireKine starts kine for a test, as Require starts a store emulator,
// and stops it when the test ends.
func RequireKine(t testing.TB, o KineOptions) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := StartKine(ctx, o)
	return required(t, s, err)
}

func (k *KineServer) args(port int) []string {
	scheme := "http"
	if k.o.CA != "" {
		scheme = "https"
	}
	k.ClientURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)
	// WAL as k3s runs it; the poll interval is kine's default.
	endpoint := "sqlite://" + k.Database + "?_journal=WAL&cache=shared&_busy_timeout=30000&_txlock=immediate"
	if k.o.Datastore != "" {
		endpoint = k.o.Datastore
	}
	args := []string{"--listen-address", fmt.Sprintf("127.0.0.1:%d", port), "--endpoint", endpoint, "--metrics-bind-address", "0"}
	if k.o.CA != "" {
		args = append(args, "--server-cert-file", k.o.Cert, "--server-key-file", k.o.Key, "--trusted-ca-file", k.o.CA)
	}
	return args
}

// ready: kine says so once its schema is in place and it listens.
func (k *KineServer) ready(logs string) bool { return strings.Contains(logs, "Kine available at") }
