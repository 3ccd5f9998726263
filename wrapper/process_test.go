package wrapper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/wrapper"
)

// A lone member runs as a process of etcd 3.5, its configuration read
// strictly for 3.5 (a key 3.7 dropped is 3.5's), with the wrapper's
// probes, and stops cleanly on the wrapper's stop: the marker and the
// guard are written once etcd has exited.
func TestProcessRunsItsRelease(t *testing.T) {
	bin := emulator.RequireEtcdProgram(t, emulator.Etcd35)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	peer, client, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "etcd.yaml")
	data := filepath.Join(dir, "m0")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `name: m0
data-dir: %s
listen-peer-urls: %s
initial-advertise-peer-urls: %s
listen-client-urls: %s
advertise-client-urls: %s
initial-cluster: m0=%s
initial-cluster-token: proc
experimental-initial-corrupt-check: true
log-level: warn
`, data, peer.String(), peer.String(), client.String(), client.String(), peer.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := wrapper.LoadConfig(conf); err == nil || !strings.Contains(err.Error(), "feature-gates: InitialCorruptCheck=true") {
		t.Fatalf("etcd 3.7 reads no experimental-initial-corrupt-check: %v", err)
	}
	release, err := wrapper.ReleaseOf(ctx, bin)
	if err != nil || release.MinorString() != "3.5" {
		t.Fatalf("the binary's release: %s, %v", release, err)
	}
	f36, err := wrapper.LoadFile(conf, etcdversion.MustParse("3.6.16"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&wrapper.Process{Path: bin, File: f36}).Release(ctx); err == nil || !strings.Contains(err.Error(), "read for 3.6.16") {
		t.Fatalf("a configuration read for 3.6 on a 3.5 binary: %v", err)
	}
	f, err := wrapper.LoadFile(conf, release)
	if err != nil {
		t.Fatal(err)
	}
	health := "127.0.0.1:" + freePort(t)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan wrapper.Etcd, 1)
	done := make(chan error, 1)
	go func() {
		done <- wrapper.Run(rctx, wrapper.Options{Config: f.Config, Runner: &wrapper.Process{Path: bin, File: f}, Listen: health,
			OnReady: func(e wrapper.Etcd) { ready <- e }})
	}()
	var e wrapper.Etcd
	select {
	case e = <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(60 * time.Second):
		t.Fatal("not ready")
	}
	st, err := e.Client().Status(ctx, client.String())
	if err != nil || st.Version != release.String() || st.Header.MemberId != e.ID() {
		t.Fatalf("the member answers %+v, %v; want etcd %s as %x", st, err, release, e.ID())
	}
	if _, err := e.Client().Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		waitOK(t, "http://"+health+p)
	}
	pid := processOf(t, data)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stopped: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("etcd (pid %d) still runs after the wrapper stopped", pid)
	}
	for _, f := range []string{wrapper.CleanShutdownMarker, "etcdkit-guard.json"} {
		if _, err := os.Stat(filepath.Join(data, f)); err != nil {
			t.Fatalf("after the stop: %v", err)
		}
	}
}

// processOf is the pid of the etcd that holds the data dir, from /proc.
func processOf(t *testing.T, data string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), filepath.Join(data, wrapper.ProcessConfigFile)) {
			return pid
		}
	}
	t.Fatal("no etcd process reads the data dir's configuration")
	return 0
}
