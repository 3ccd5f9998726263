package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/gobuild"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/wrapper"
)

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
	if _, err := capture.Full(ctx, cli, st, snapshot.FullOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// A division starts every member of c its own way against the store in
// storeDir, waits until each serves, and returns the action each
// member's start-up decided, in c's order. The members stop when the
// test ends.
type division struct {
	name string
	// tls: the division runs its members with TLS on clients and peers.
	tls   bool
	start func(t *testing.T, ctx context.Context, c *etcdtest.Cluster, storeDir string) []string
}

var divisions = []division{
	// The wrapper holds the store.
	{"self", true, func(t *testing.T, ctx context.Context, c *etcdtest.Cluster, storeDir string) []string {
		st, err := store.Open(ctx, "file://"+storeDir)
		if err != nil {
			t.Fatal(err)
		}
		return inProcess(t, ctx, c, func(cfg *embed.Config) wrapper.Options {
			return wrapper.Options{Config: cfg, Preparer: &startup.Local{Store: st}}
		})
	}},
	// The wrapper has no store: the sidecar's API validates and restores.
	{"sidecar", true, func(t *testing.T, ctx context.Context, c *etcdtest.Cluster, storeDir string) []string {
		st, err := store.Open(ctx, "file://"+storeDir)
		if err != nil {
			t.Fatal(err)
		}
		root := filepath.Dir(c.Members[0].Dir)
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The member the client names is not running yet: this sidecar
		// only prepares data dirs.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members[0].ClientURL.String()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cli.Close() })
		sc, err := sidecar.New(sidecar.Options{
			Client:   cli,
			Endpoint: c.Members[0].ClientURL.String(),
			Backups:  sidecar.BackupOptions{Store: st},
			API:      sidecar.APIOptions{RestoreRoot: root},
			WorkDir:  t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := sc.Handler(sidecar.Auth{TokenFile: token})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return inProcess(t, ctx, c, func(cfg *embed.Config) wrapper.Options {
			return wrapper.Options{Config: cfg, Preparer: startup.Remote{Client: &api.Client{URL: srv.URL, Token: "tok"}}}
		})
	}},
	// One process per member does everything: the all-in-one example.
	// Its sidecar's client is plain, so its members are too.
	{"all-in-one", false, allInOne},
}

// inProcess runs a wrapper per member in this process.
func inProcess(t *testing.T, ctx context.Context, c *etcdtest.Cluster, options func(*embed.Config) wrapper.Options) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	logs := &syncBuffer{}
	var (
		mu      sync.Mutex
		decided = map[string]string{}
		done    = make(chan error, len(c.Members))
		ready   = make(chan string, len(c.Members))
	)
	for _, m := range c.Members {
		o := options(m.Config())
		o.Endpoints = others(c, m)
		o.JoinTimeout = 2 * time.Minute
		o.Logger = slog.New(slog.NewTextHandler(logs, nil)).With("member", m.Name)
		o.OnPlan = func(p startup.Plan) { mu.Lock(); decided[m.Name] = string(p.Action); mu.Unlock() }
		o.OnReady = func(wrapper.Etcd) { ready <- m.Name }
		go func() { done <- wrapper.Run(ctx, o) }()
	}
	running := len(c.Members)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the wrappers' logs:\n%s", logs)
		}
		cancel()
		for range running {
			if err := <-done; err != nil {
				t.Errorf("a wrapper stopped with: %v", err)
			}
		}
	})
	for range c.Members {
		select {
		case <-ready:
		case err := <-done:
			running--
			t.Fatalf("a wrapper returned before etcd served: %v", err)
		case <-ctx.Done():
			t.Fatalf("not every member serves; decided so far: %v", decided)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, m := range c.Members {
		got = append(got, decided[m.Name])
	}
	return got
}

// syncBuffer is a log several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func others(c *etcdtest.Cluster, m *etcdtest.Member) []string {
	var eps []string
	for _, o := range c.Members {
		if o != m {
			eps = append(eps, o.ClientURL.String())
		}
	}
	return eps
}

var (
	allInOneOnce sync.Once
	allInOneBin  string
	allInOneErr  error
)

// TestMain removes the all-in-one binary the tests share (50 MB a run).
func TestMain(m *testing.M) {
	code := m.Run()
	if allInOneBin != "" {
		_ = os.RemoveAll(filepath.Dir(allInOneBin))
	}
	os.Exit(code)
}

// allInOne runs the all-in-one example once per member, each with an
// etcd configuration file as etcd-wrapper reads it.
func allInOne(t *testing.T, ctx context.Context, c *etcdtest.Cluster, storeDir string) []string {
	t.Helper()
	allInOneOnce.Do(func() {
		dir, err := os.MkdirTemp("", "etcdkit-all-in-one-bin-")
		if err != nil {
			allInOneErr = err
			return
		}
		allInOneBin = filepath.Join(dir, "all-in-one")
		allInOneErr = gobuild.Build(ctx, allInOneBin, "./all-in-one")
	})
	if allInOneErr != nil {
		t.Fatalf("build all-in-one: %v", allInOneErr)
	}
	starts := regexp.MustCompile(`^member (\S+) starts: (\S+) `)
	type line struct{ name, action string }
	lines := make(chan line, len(c.Members))
	serving := make(chan string, len(c.Members))
	for _, m := range c.Members {
		config := m.ConfigFile(t, t.TempDir())
		cmd := exec.Command(allInOneBin, "-config", config, "-store", "file://"+storeDir, "-peer-endpoints", strings.Join(others(c, m), ","))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if g := starts.FindStringSubmatch(sc.Text()); g != nil {
					lines <- line{g[1], g[2]}
				}
				if strings.Contains(sc.Text(), " serves at ") {
					serving <- m.Name
				}
			}
			_ = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			if t.Failed() {
				t.Logf("all-in-one %s's log:\n%s", m.Name, stderr.String())
			}
		})
	}
	decided := map[string]string{}
	for len(decided) < len(c.Members) || len(serving) < len(c.Members) {
		select {
		case l := <-lines:
			decided[l.name] = l.action
		case <-ctx.Done():
			t.Fatalf("not every member serves; decided so far: %v", decided)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var got []string
	for _, m := range c.Members {
		got = append(got, decided[m.Name])
	}
	return got
}

// The same case decides the same in every division: the start-up is one
// table, whoever holds the store. The three-member case with backups is
// the one that diverged before package startup: with the sidecar's API,
// every member bootstrapped an empty cluster beside the backups.
func TestOneDecisionInEveryDivision(t *testing.T) {
	t.Parallel()
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
		// The first member restores; the others join it. (Three members
		// with no backups bootstrap in most other tests.)
		{"three members, empty, backups", 3, true, []string{"restore", "join-as-learner", "join-as-learner"}},
	}
	for _, tc := range cases {
		for _, div := range divisions {
			t.Run(tc.name+"/"+div.name, func(t *testing.T) {
				t.Parallel()
				storeDir := filepath.Join(t.TempDir(), "store")
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
				c := etcdtest.Reserve(t, etcdtest.Options{Members: tc.members, UnsafeNoFsync: true, TLS: div.tls})
				if got := div.start(t, ctx, c, storeDir); !slices.Equal(got, tc.want) {
					t.Errorf("decided %v, want %v", got, tc.want)
				}
				resp, err := c.Members[0].Client(t).Get(ctx, "/seed/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int64{true: keys, false: 0}[tc.backups]; resp.Count != want {
					t.Errorf("the cluster holds %d seed keys, want %d", resp.Count, want)
				}
			})
		}
	}
}
