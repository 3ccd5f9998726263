package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/gobuild"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// wrapperBin and backupBin are the two binaries, built once; the tests
// run them as processes, the way a pod does.
var wrapperBin, backupBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "etcd-wrapper-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wrapperBin, backupBin = filepath.Join(dir, "etcd-wrapper"), filepath.Join(dir, "etcd-backup")
	for bin, pkg := range map[string]string{wrapperBin: ".", backupBin: "../etcd-backup"} {
		if err := gobuild.Build(context.Background(), bin, pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	// The tests share one emulator of each kind, each on a bucket of its
	// own.
	code := emulator.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running binary whose output is kept for the test's log.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan error
	mu     sync.Mutex
	out    strings.Builder
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func start(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, exited: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("--- %s ---\n%s", p.name, tail(p.output(), 40))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// kill sends SIGKILL and waits.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	if err := <-p.exited; err == nil {
		t.Errorf("%s exited 0 after SIGKILL", p.name)
	}
}

// term sends SIGTERM and returns the exit error.
func (p *proc) term(t *testing.T) error {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not stop within 60s of SIGTERM", p.name)
		return nil
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case err := <-p.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(d):
		t.Fatalf("%s still runs after %s", p.name, d)
		return -1
	}
}

// node is one member's addresses, data dir and configuration file.
type node struct {
	name, dir, config string
	peer, client      string
	health            string
}

// newNodes lays out n members; with sec, etcd's configuration serves
// clients and peers over TLS.
func newNodes(t *testing.T, n int, sec *secure) []*node {
	t.Helper()
	root := t.TempDir()
	var nodes []*node
	for i := range n {
		peer, client, err := etcdtest.FreeURLs()
		if err != nil {
			t.Fatal(err)
		}
		peer.Scheme, client.Scheme = sec.scheme(), sec.scheme()
		hp, err := etcdtest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("m%d", i)
		nodes = append(nodes, &node{name: name, dir: filepath.Join(root, name, "data"), config: filepath.Join(root, name+".yaml"),
			peer: peer.String(), client: client.String(), health: fmt.Sprintf("127.0.0.1:%d", hp)})
	}
	var initial []string
	for _, nd := range nodes {
		initial = append(initial, nd.name+"="+nd.peer)
	}
	for _, nd := range nodes {
		cfg := fmt.Sprintf(`name: %s
data-dir: %s
listen-peer-urls: %s
initial-advertise-peer-urls: %s
listen-client-urls: %s
advertise-client-urls: %s
initial-cluster: %s
initial-cluster-token: e2e
initial-cluster-state: new
heartbeat-interval: 50
election-timeout: 500
log-level: warn
%s`, nd.name, nd.dir, nd.peer, nd.peer, nd.client, nd.client, strings.Join(initial, ","), sec.yaml())
		if err := os.WriteFile(nd.config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// others are the client URLs of every node but nd.
func others(nodes []*node, nd *node) string {
	var out []string
	for _, o := range nodes {
		if o != nd {
			out = append(out, o.client)
		}
	}
	return strings.Join(out, ",")
}

func endpoints(nodes []*node) string {
	var out []string
	for _, o := range nodes {
		out = append(out, o.client)
	}
	return strings.Join(out, ",")
}

// ready waits until the node's /readyz answers 200.
func (nd *node) ready(t *testing.T, d time.Duration) {
	t.Helper()
	etcdtest.Eventually(t, nd.name+" is ready", d, func() bool {
		code, _ := probe(nd, "/readyz")
		return code == http.StatusOK
	})
}

// lastBackedUp is the last revision of the store's latest chain, 0 when
// there is none.
func lastBackedUp(t *testing.T, storeURL string) int64 {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	return lastBackedUpIn(t, st)
}

// lastBackedUpIn is the newest revision the latest chain in st reaches.
func lastBackedUpIn(t *testing.T, st store.Store) int64 {
	t.Helper()
	cat, err := snapshot.List(context.Background(), st)
	if err != nil {
		return 0
	}
	chain, err := cat.Latest()
	if err != nil {
		return 0
	}
	return chain.LastRevision()
}
