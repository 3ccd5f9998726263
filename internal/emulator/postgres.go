package emulator

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Postgres is PostgreSQL from Debian's package, run by tools/postgres/run.sh:
// a datastore kine keeps etcd's keys in. Its sequences leave gaps in kine's
// revisions (a create that loses a race rolls back and keeps its number).
const Postgres Kind = "postgres"

// postgresProgram is the launcher, present when Debian's PostgreSQL is.
func postgresProgram(tools string) (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return "", fmt.Errorf("%s: %w: /usr/lib/postgresql/*/bin/postgres is missing (Debian: apt-get install postgresql)", Postgres, ErrNotInstalled)
	}
	return filepath.Join(tools, "postgres", "run.sh"), nil
}

// RequirePostgres starts PostgreSQL for a test, as Require starts a store
// emulator, and stops it when the test ends. Endpoint is a kine datastore
// endpoint of database kine on it.
func RequirePostgres(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Postgres, Options{})
	return required(t, s, err)
}

func (s *Server) postgresArgs() []string {
	s.Endpoint = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/kine?sslmode=disable", s.Port)
	return []string{s.dir, fmt.Sprint(s.Port)}
}

// postgresReady: it accepts connections.
func (s *Server) postgresReady(ctx context.Context) bool {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_isready")
	if len(matches) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, matches[len(matches)-1], "-h", "127.0.0.1", "-p", fmt.Sprint(s.Port), "-q").Run() == nil
}
