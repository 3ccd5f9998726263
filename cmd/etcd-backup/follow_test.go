package main

import (
	"context"
	"maps"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
)

var standbyLine = regexp.MustCompile(`msg=standby revision=(\d+)`)

// standbyRevision is the newest revision a follower's log says its
// standby holds, 0 before any.
func standbyRevision(p *sidecarProc) int64 {
	m := standbyLine.FindAllStringSubmatch(p.logs.String(), -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(m[len(m)-1][1], 10, 64)
	return n
}

// restore --follow beside a sidecar that uploads over TLS with
// authentication: the standby keeps up, a SIGKILL and a restart resume it
// without the full, and SIGTERM leaves a data dir that serves the live
// keyspace at its revision.
func TestRestoreFollow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, conn := secureMember(t)
	cli := c.Client(t)
	storeURL := "file://" + t.TempDir()
	sidecar := startServe(t, conn, storeURL, "--compression", "gzip")
	uploading(t, sidecar)

	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	dataDir := filepath.Join(t.TempDir(), "standby")
	f := &sidecarProc{name: "follow", args: []string{"restore", "--follow", "--store", storeURL, "--data-dir", dataDir,
		"--name", "standby", "--peer-urls", peer.String(), "--poll", "100ms"}}
	f.start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the follower's log:\n%s", f.logs.String())
		}
	})
	reaches := func(what string) int64 {
		t.Helper()
		resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		head := resp.Header.Revision
		etcdtest.Eventually(t, what, time.Minute, func() bool { return standbyRevision(f) >= head })
		return head
	}
	work := etcdtest.Workload{Ops: 300, Prefix: "/f/", Seed: 41, TxnPercent: 10, DeletePercent: 10, LeasePercent: 10}
	if _, err := work.Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	reaches("the standby reaches the member")

	// SIGKILL, more writes, a start: it resumes.
	if err := f.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-f.exited; err == nil {
		t.Fatal("the follower exited 0 after SIGKILL")
	}
	work.Seed = 42
	if _, err := work.Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	f.start(t)
	reaches("the restarted standby reaches the member")
	if logs := f.logs.String(); !regexp.MustCompile(`resuming the standby`).MatchString(logs) ||
		regexp.MustCompile(`built from a full snapshot`).MatchString(logs) {
		t.Fatalf("the restarted follower did not resume, or downloaded the full again:\n%s", logs)
	}

	// SIGTERM: the data dir, as the standby stood.
	work.Seed = 43
	if _, err := work.Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	rev := reaches("the standby reaches the last writes")
	if err := f.term(t); err != nil {
		t.Fatalf("the follower on SIGTERM: %v", err)
	}
	m := etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true, Auth: true, Security: c.Security}, "standby", dataDir, peer)
	want, _, err := etcdtest.ReadAll(ctx, cli, "/", rev)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := etcdtest.ReadAll(ctx, m.Client(t), "/", rev)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the promoted standby holds %d keys at revision %d, the member %d", len(got), rev, len(want))
	}
}
