package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/wrapper"
)

// client reaches the members at eps; with sec, over TLS as root.
func client(t *testing.T, eps string, sec *secure) *clientv3.Client {
	t.Helper()
	cli, err := etcdclient.New(context.Background(), sec.conn(eps))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// logged says whether a line of out holds every one of parts.
func logged(out string, parts ...string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return true
		}
	}
	return false
}

func corrupt(t *testing.T, dir string) {
	t.Helper()
	if err := os.Truncate(filepath.Join(dir, "member", "snap", "db"), 10000); err != nil {
		t.Fatal(err)
	}
}

// The loader rejects a key etcd 3.7 ignores, naming its feature gate.
func TestConfigRejected(t *testing.T) {
	nd := newNodes(t, 1, nil)[0]
	b, _ := os.ReadFile(nd.config)
	if err := os.WriteFile(nd.config, append(b, "experimental-initial-corrupt-check: true\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "wrapper", wrapperBin, nil, "--config", nd.config, "--listen", nd.health)
	if code := p.wait(t, 30*time.Second); code != 2 || !strings.Contains(p.output(), "feature-gates: InitialCorruptCheck=true") {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
}

// With no store and no sidecar: a fresh member starts; SIGTERM leaves the
// clean-shutdown marker and exits 0; a corrupt data dir is refused, and
// wiping does not help a member without peers.
func TestNoStoreNoSidecar(t *testing.T) {
	t.Parallel()
	nd := newNodes(t, 1, nil)[0]
	args := []string{"--config", nd.config, "--listen", nd.health}
	p := start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 30*time.Second)
	if _, err := client(t, nd.client, nil).Put(context.Background(), "/k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := p.term(t); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.output())
	}
	for _, f := range []string{wrapper.CleanShutdownMarker, "etcdkit-guard.json"} {
		if _, err := os.Stat(filepath.Join(nd.dir, f)); err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	}
	// Restarts on its data after a clean stop.
	p = start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 30*time.Second)
	if r, err := client(t, nd.client, nil).Get(context.Background(), "/k"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("after restart: %v %v", r, err)
	}
	p.kill(t)
	corrupt(t, nd.dir)
	for _, extra := range [][]string{nil, {"--on-corrupt", "wipe"}} {
		p = start(t, "wrapper", wrapperBin, nil, append(args, extra...)...)
		// A lone member: only a store would let it start, and the
		// wrapper names it by its flag.
		if code := p.wait(t, 30*time.Second); code != 1 || !strings.Contains(p.output(), "refusing to start") || !strings.Contains(p.output(), "(etcd-wrapper: --store)") {
			t.Fatalf("corrupt data dir %v: exit %d\n%s", extra, code, p.output())
		}
	}
	if _, err := os.Stat(filepath.Join(nd.dir, "member", "snap", "db")); err != nil {
		t.Fatalf("the refused data dir was touched: %v", err)
	}
}

// --init=sidecar: the sidecar prepares the data dir. A first start is
// left to bootstrap; after the member is killed and its database
// corrupted, the sidecar restores it from the backups it took.
//
// With TLS and auth, the wrapper calls the sidecar's API over HTTPS with
// a client certificate instead of the token; the sidecar, started before
// etcd, logs in once authentication is on; the restored member keeps its
// users.
func TestInitSidecar(t *testing.T) {
	t.Parallel()
	t.Run("plain", func(t *testing.T) { initSidecar(t, nil) })
	t.Run("TLS and auth", func(t *testing.T) { initSidecar(t, newSecure(t)) })
}

func initSidecar(t *testing.T, sec *secure) {
	nd := newNodes(t, 1, sec)[0]
	work := t.TempDir()
	storeURL := "file://" + filepath.Join(work, "store")
	token := filepath.Join(work, "token")
	if err := os.WriteFile(token, []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	api := fmt.Sprintf("127.0.0.1:%d", port)
	sc := start(t, "sidecar", backupBin, nil, append([]string{"serve", "--store", storeURL, "--endpoints", nd.client, "--listen", api,
		"--token-file", token, "--restore-root", filepath.Dir(nd.dir), "--delta-period", "200ms", "--full-schedule", "@every 1h",
		"--follow-interval", "100ms", "--gc-period", "0s", "--work-dir", work}, sec.backupFlags()...)...)
	args := []string{"--config", nd.config, "--listen", nd.health, "--init", "sidecar", "--sidecar-url", sec.scheme() + "://" + api}
	if sec == nil {
		args = append(args, "--sidecar-token-file", token)
	} else {
		args = append(args, "--sidecar-cacert", sec.ca.File, "--sidecar-cert", sec.wrapper.CertFile, "--sidecar-key", sec.wrapper.KeyFile)
	}
	p := start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 60*time.Second)
	if out := p.output(); !strings.Contains(out, "verdict=Empty") || !logged(out, "startup: decided", "action=bootstrap") {
		t.Fatalf("the first start did not bootstrap on the sidecar's verdict:\n%s", out)
	}
	cli := client(t, nd.client, sec)
	if sec != nil {
		cli = sec.enableAuth(t, cli)
		// The full the sidecar took at its start predates the users; a
		// new one holds them.
		etcdtest.Eventually(t, "a full snapshot through the sidecar's API", 30*time.Second, func() bool {
			_, err := sec.sidecar("https://" + api).Full(context.Background())
			return err == nil
		})
	}
	var want *clientv3.GetResponse
	for i := range 100 {
		if _, err := cli.Put(context.Background(), "/init/"+strings.Repeat("k", i%30)+string(rune('a'+i%26)), "v"); err != nil {
			t.Fatal(err)
		}
	}
	want, err = cli.Get(context.Background(), "/init/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	// The sidecar's deltas reach the last write.
	etcdtest.Eventually(t, "the backups reach the last write", 30*time.Second, func() bool {
		return lastBackedUp(t, storeURL) >= want.Header.Revision
	})
	p.kill(t)
	corrupt(t, nd.dir)
	p = start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 60*time.Second)
	if out := p.output(); !logged(out, "startup: decided", "action=restore") || !strings.Contains(out, "startup: restored") {
		t.Fatalf("the wrapper's log does not say the sidecar restored:\n%s", out)
	}
	got, err := client(t, nd.client, sec).Get(context.Background(), "/init/", clientv3.WithPrefix())
	if err != nil || got.Count != want.Count {
		t.Fatalf("after the sidecar's restore: %d keys (%v), want %d", got.Count, err, want.Count)
	}
	if err := p.term(t); err != nil {
		t.Fatal(err)
	}
	if err := sc.term(t); err != nil {
		t.Fatal(err)
	}
}
