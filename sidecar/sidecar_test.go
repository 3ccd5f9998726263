package sidecar_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/store"
)

const token = "s3cret"

// running is a sidecar serving its API on loopback.
type running struct {
	sc     *sidecar.Sidecar
	srv    *httptest.Server
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *running) stop() {
	r.cancel()
	<-r.done
	r.srv.Close()
}

type setup struct {
	st        store.Store
	tokenFile string
	root      string
	peers     map[string]string
	// deltaPeriod of the sidecars started; 0: 200 ms.
	deltaPeriod time.Duration
}

func newSetup(t *testing.T) *setup {
	t.Helper()
	st, err := store.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &setup{st: st, tokenFile: tf, root: t.TempDir(), peers: map[string]string{}}
}

// start runs a sidecar beside member m, deltas every s.deltaPeriod.
func (s *setup) start(t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member) *running {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	s.peers[m.Name] = "http://" + srv.Listener.Addr().String()
	sc, err := sidecar.New(sidecar.Options{
		Client:     c.Client(t),
		Endpoint:   m.ClientURL.String(),
		Backups:    sidecar.BackupOptions{Store: s.st, Snapshots: capture.Options{FullSchedule: "@every 1h", DeltaPeriod: cmp.Or(s.deltaPeriod, 200*time.Millisecond), RetentionPeriod: capture.Off, MinBackoff: 100 * time.Millisecond}},
		WorkDir:    t.TempDir(),
		API:        sidecar.APIOptions{RestoreRoot: s.root, Peers: s.peers},
		Membership: sidecar.MembershipOptions{Follow: memberFollow},
	})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Config.Handler, err = sc.Handler(sidecar.Auth{TokenFile: s.tokenFile}); err != nil {
		t.Fatal(err)
	}
	srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{sc: sc, srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		_ = sc.Run(ctx)
	}()
	t.Cleanup(r.stop)
	return r
}

// call makes an API call and decodes a JSON answer into out.
func call(t *testing.T, method, url, tok, body string, out any) (int, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func put(t *testing.T, cli *clientv3.Client, n int, prefix string) {
	t.Helper()
	for i := range n {
		if _, err := cli.Put(context.Background(), prefix+string(rune('a'+i%26))+strings.Repeat("x", i%5), "v"); err != nil {
			t.Fatal(err)
		}
	}
}

// New checks every option before it registers a metric: a caller that
// retries after an error, on the same registry, gets the next error or a
// sidecar, never a panic of a metric registered twice.
func TestNewChecksBeforeRegistering(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	st := newSetup(t).st
	reg := prometheus.NewRegistry()
	base := sidecar.Options{Client: cli, Endpoint: "http://127.0.0.1:1", WorkDir: t.TempDir(), Registry: reg}
	for name, o := range map[string]sidecar.Options{
		"standby without store": {Standby: &restore.FollowOptions{Restore: restore.Options{Member: member.Spec{DataDir: t.TempDir()}}}},
		"bad defrag schedule":   {Backups: sidecar.BackupOptions{Store: st}, Defrag: sidecar.DefragOptions{Schedule: "every now and then"}},
		"bad full schedule":     {Backups: sidecar.BackupOptions{Store: st, Snapshots: capture.Options{FullSchedule: "never"}}},
	} {
		o.Client, o.Endpoint, o.WorkDir, o.Registry = base.Client, base.Endpoint, base.WorkDir, base.Registry
		for range 2 {
			if _, err := sidecar.New(o); err == nil {
				t.Fatalf("%s: New accepted it", name)
			}
		}
	}
	base.Backups.Store = st
	if _, err := sidecar.New(base); err != nil {
		t.Fatalf("a good New after refused ones, on their registry: %v", err)
	}
}
