package wrapper_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/wrapper"
)

// decisions records the action each member's start-up decided, from the
// "decided" line it logs.
type decisions struct {
	mu  sync.Mutex
	got map[string]string
}

func (d *decisions) handler(name string) slog.Handler {
	return recorder{func(r slog.Record) {
		if !strings.HasSuffix(r.Message, "decided") {
			return
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "action" {
				d.mu.Lock()
				d.got[name] = a.Value.String()
				d.mu.Unlock()
			}
			return true
		})
	}}
}

type recorder struct{ f func(slog.Record) }

func (recorder) Enabled(context.Context, slog.Level) bool        { return true }
func (h recorder) Handle(_ context.Context, r slog.Record) error { h.f(r); return nil }
func (h recorder) WithAttrs([]slog.Attr) slog.Handler            { return h }
func (h recorder) WithGroup(string) slog.Handler                 { return h }

// seedStore writes a full snapshot of a cluster holding keys keys into a
// file store at dir.
func seedStore(t *testing.T, dir string, keys int) {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range keys {
		if _, err := cli.Put(ctx, fmt.Sprintf("/seed/%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Full(ctx, cli, st, snapshot.FullOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// A division is who prepares the data dir: the wrapper with the store
// (self), or the sidecar's API for a wrapper with no store of its own.
type division struct {
	name    string
	options func(t *testing.T, c *etcdtest.Cluster, st store.Store, root string) func(*embed.Config) wrapper.Options
}

var divisions = []division{
	{"self", func(_ *testing.T, _ *etcdtest.Cluster, st store.Store, _ string) func(*embed.Config) wrapper.Options {
		return func(cfg *embed.Config) wrapper.Options { return wrapper.Options{Config: cfg, Store: st} }
	}},
	{"sidecar", func(t *testing.T, c *etcdtest.Cluster, st store.Store, root string) func(*embed.Config) wrapper.Options {
		token := filepath.Join(root, "token")
		if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The member the client names is not running yet: the sidecar
		// only prepares data dirs here.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members[0].ClientURL.String()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		sc, err := sidecar.New(sidecar.Options{Client: cli, Endpoint: c.Members[0].ClientURL.String(), Store: st,
			RestoreRoot: root, WorkDir: filepath.Join(root, "work")})
		if err != nil {
			t.Fatal(err)
		}
		h, err := sc.Handler(sidecar.Auth{TokenFile: token})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return func(cfg *embed.Config) wrapper.Options {
			return wrapper.Options{Config: cfg, Init: wrapper.InitSidecar, Sidecar: &api.Client{URL: srv.URL, Token: "tok"}}
		}
	}},
}

// The same case decides the same in every division: the start-up is one
// table, whoever holds the store.
func TestOneDecisionInEveryDivision(t *testing.T) {
	const keys = 20
	seed := filepath.Join(t.TempDir(), "seed")
	seedStore(t, seed, keys)
	cases := []struct {
		name    string
		members int
		backups bool
		want    []string
	}{
		{"one member, empty, no backups", 1, false, []string{"bootstrap"}},
		{"one member, empty, backups", 1, true, []string{"restore"}},
		{"three members, empty, no backups", 3, false, []string{"bootstrap", "bootstrap", "bootstrap"}},
		// The first member restores; the others join it, rather than all
		// bootstrapping an empty cluster beside the backups.
		{"three members, empty, backups", 3, true, []string{"restore", "join-as-learner", "join-as-learner"}},
	}
	for _, tc := range cases {
		for _, div := range divisions {
			t.Run(tc.name+"/"+div.name, func(t *testing.T) {
				root := t.TempDir()
				storeDir := filepath.Join(root, "store")
				if err := os.MkdirAll(storeDir, 0o700); err != nil {
					t.Fatal(err)
				}
				if tc.backups {
					if err := os.CopyFS(storeDir, os.DirFS(seed)); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				st, err := store.Open(ctx, "file://"+storeDir)
				if err != nil {
					t.Fatal(err)
				}
				c := etcdtest.Reserve(t, etcdtest.Options{Members: tc.members, Dir: filepath.Join(root, "members"), UnsafeNoFsync: true})
				options := div.options(t, c, st, root)
				d := &decisions{got: map[string]string{}}
				done := make(chan error, len(c.Members))
				ready := make(chan string, len(c.Members))
				for _, m := range c.Members {
					o := options(m.Config())
					for _, other := range c.Members {
						if other != m {
							o.Endpoints = append(o.Endpoints, other.ClientURL.String())
						}
					}
					o.JoinTimeout = 2 * time.Minute
					o.Logger = slog.New(d.handler(m.Name))
					o.OnReady = func(*embed.Etcd) { ready <- m.Name }
					go func() { done <- wrapper.Run(ctx, o) }()
				}
				for range c.Members {
					select {
					case <-ready:
					case err := <-done:
						t.Fatalf("a wrapper returned before etcd served: %v", err)
					case <-ctx.Done():
						t.Fatalf("not every member serves; decided so far: %v", d.got)
					}
				}
				d.mu.Lock()
				var got []string
				for _, m := range c.Members {
					got = append(got, d.got[m.Name])
				}
				d.mu.Unlock()
				if !slices.Equal(got, tc.want) {
					t.Errorf("decided %v, want %v", got, tc.want)
				}
				cli := c.Members[0].Client(t)
				resp, err := cli.Get(ctx, "/seed/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int64{true: keys, false: 0}[tc.backups]; resp.Count != want {
					t.Errorf("the cluster holds %d seed keys, want %d", resp.Count, want)
				}
				cancel()
				for range c.Members {
					if err := <-done; err != nil {
						t.Errorf("a wrapper stopped with: %v", err)
					}
				}
			})
		}
	}
}
