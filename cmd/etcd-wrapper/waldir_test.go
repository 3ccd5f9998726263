package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A member whose WAL lives in a wal-dir of its own (TLS on): after a kill
// its data dir is Valid and it restarts on it, nothing moved; with its
// database damaged it is restored from the store, the WAL written to the
// wal-dir, and the old data dir and WAL both moved aside, never deleted.
func TestDedicatedWALDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sec := newSecure(t)
	nd := newNodes(t, 1, sec)[0]
	walDir := nd.dir + ".wal"
	f, err := os.OpenFile(nd.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(f, "wal-dir: %s\n", walDir); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	storeURL := "file://" + t.TempDir()
	args := []string{"--config", nd.config, "--listen", nd.health, "--store", storeURL, "--log-format", "text"}
	w := start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 60*time.Second)
	cli := client(t, nd.client, sec)
	for i := range 50 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/w/%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	snap := start(t, "snapshot", backupBin, nil, "snapshot", "--store", storeURL, "--endpoints", nd.client,
		"--cacert", sec.ca.File, "--cert", sec.operator.CertFile, "--key", sec.operator.KeyFile)
	if code := snap.wait(t, time.Minute); code != 0 {
		t.Fatalf("snapshot: exit %d\n%s", code, snap.output())
	}
	if _, err := os.Stat(filepath.Join(nd.dir, "member", "wal")); !os.IsNotExist(err) {
		t.Fatalf("etcd wrote a WAL into the data dir: %v", err)
	}

	w.kill(t)
	w = start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 60*time.Second)
	if out := w.output(); !logged(out, "startup: data dir validated", "verdict=Valid") || !logged(out, "startup: decided", "action=restart") {
		t.Fatalf("after a kill the member did not restart on its data dir:\n%s", out)
	}
	if aside, _ := filepath.Glob(nd.dir + "*.bak-*"); len(aside) != 0 {
		t.Fatalf("a sound data dir was moved aside: %v", aside)
	}

	if err := w.term(t); err != nil {
		t.Fatal(err)
	}
	corrupt(t, nd.dir)
	w = start(t, "wrapper", wrapperBin, nil, args...)
	nd.ready(t, 60*time.Second)
	out := w.output()
	if !logged(out, "verdict=Corrupt") || !logged(out, "startup: restored") {
		t.Fatalf("a damaged database was not restored:\n%s", out)
	}
	for _, pattern := range []string{nd.dir + ".bak-*/member/snap/db", walDir + ".bak-*/*.wal", walDir + "/*.wal"} {
		if found, _ := filepath.Glob(pattern); len(found) == 0 {
			t.Fatalf("nothing at %s:\n%s", pattern, out)
		}
	}
	resp, err := client(t, nd.client, sec).Get(ctx, "/w/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 50 {
		t.Fatalf("the restored member holds %v keys (%v), want 50", resp, err)
	}
	if strings.Contains(out, "panic") {
		t.Fatal(out)
	}
}
