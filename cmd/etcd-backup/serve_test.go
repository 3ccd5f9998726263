package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// sidecarProc is one etcd-backup serve process.
type sidecarProc struct {
	name, url string
	args      []string
	// dir is the process's working directory; "": the test's.
	dir string
	// env is added to the test's environment.
	env    []string
	cmd    *exec.Cmd
	exited chan error
	// logs is everything the process wrote.
	logs lockedLog
}

// lockedLog is a log a process writes while the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func (p *sidecarProc) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command(binary, p.args...)
	p.cmd.Dir = p.dir
	if p.env != nil {
		p.cmd.Env = append(os.Environ(), p.env...)
	}
	p.logs.Reset()
	p.cmd.Stderr = io.MultiWriter(testWriter{t, p.name}, &p.logs)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.exited = make(chan error, 1)
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
}

// term stops the process with SIGTERM and waits for its exit.
func (p *sidecarProc) term(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.exited:
		return err
	case <-time.After(time.Minute):
		return fmt.Errorf("%s did not exit a minute after SIGTERM", p.name)
	}
}

// ready asks /readyz: whether the sidecar serves, and whether it uploads.
func (p *sidecarProc) ready() (bool, bool) {
	resp, err := http.Get(p.url + "/readyz")
	if err != nil {
		return false, false
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct{ Uploader bool }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode == http.StatusOK, body.Uploader
}

// testWriter sends a process's log lines to the test's log.
type testWriter struct {
	t    *testing.T
	name string
}

func (w testWriter) Write(b []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			w.t.Logf("%s: %s", w.name, line)
		}
	}
	return len(b), nil
}

// Three sidecar processes beside three members under continuous writes:
// the etcd leader moves twice, the uploader's sidecar is killed with
// SIGKILL and started again; afterwards the chain has no gap and restores
// to the live keyspace, up to the last write before SIGTERM.
func TestServeFollowsLeaderAndSurvivesKill(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	dir := t.TempDir()
	storeURL := "file://" + filepath.Join(dir, "store")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("t0ken"), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := map[string]*sidecarProc{}
	var peers []string
	for _, m := range c.Members {
		port, err := etcdtest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		p := &sidecarProc{name: m.Name, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
		procs[m.Name] = p
		peers = append(peers, m.Name+"="+p.url)
	}
	for _, m := range c.Members {
		p := procs[m.Name]
		p.args = []string{"serve", "--store", storeURL, "--endpoints", strings.Join(c.Endpoints(), ","),
			"--member-endpoint", m.ClientURL.String(), "--listen", strings.TrimPrefix(p.url, "http://"),
			"--token-file", tokenFile, "--peers", strings.Join(peers, ","), "--delta-period", "200ms",
			"--full-schedule", "@every 1h", "--gc-period", "0s", "--follow-interval", "100ms",
			"--work-dir", t.TempDir(), "--log-format", "text"}
		p.start(t)
	}
	uploaderIs := func(name string) {
		t.Helper()
		start := time.Now()
		deadline := start.Add(10 * time.Second)
		for {
			good := true
			for n, p := range procs {
				ready, up := p.ready()
				if !ready || up != (n == name) {
					good = false
				}
			}
			if good {
				t.Logf("%s's sidecar uploads, %s after the change", name, time.Since(start).Round(time.Millisecond))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's sidecar is not the only uploader after 10s", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	uploaderIs(c.Leader().Name)
	load := etcdtest.StartLoad(t, cli)
	time.Sleep(time.Second)

	for range 2 {
		uploaderIs(c.MoveLeader(t).Name)
		time.Sleep(time.Second)
	}

	// SIGKILL the uploader's sidecar mid-work; its restart resumes.
	up := procs[c.Leader().Name]
	if err := up.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-up.exited; err == nil {
		t.Fatal("the sidecar exited 0 after SIGKILL")
	}
	time.Sleep(time.Second)
	up.start(t)
	uploaderIs(up.name)
	// The uploader's flag rises before it has placed its backups; a
	// SIGTERM before then has nothing of its own to write. Wait until its
	// chain passes the revision of now.
	now, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	placed, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the restarted uploader's chain passes revision "+fmt.Sprint(now.Header.Revision), time.Minute, func() bool {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cat, err := snapshot.List(lctx, placed)
		if err != nil {
			return false
		}
		chain, err := cat.Latest()
		return err == nil && chain.LastRevision() >= now.Header.Revision
	})
	load.Ran(t)

	// SIGTERM: each sidecar uploads what it holds and exits 0.
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		select {
		case err := <-p.exited:
			if err != nil {
				t.Fatalf("%s's sidecar after SIGTERM: %v", p.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s's sidecar did not stop within 30s of SIGTERM", p.name)
		}
	}

	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	chain, rep := chaintest.Check(t, st, cli, chaintest.Options{Current: true})
	t.Logf("chain: full at %d, %d deltas to %d", chain.Full.LastRevision, len(chain.Deltas), rep.Digest.Revision)
}
