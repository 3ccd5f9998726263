package sidecar_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/snapshot"
)

// Three sidecars under a write load: only the one beside the leader
// uploads, it follows two leader moves within seconds, a follower
// forwards a snapshot request to it, and the chain they wrote together
// has no gap and restores to the live keyspace.
func TestUploaderFollowsTheLeader(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	s := newSetup(t)
	sidecars := map[string]*running{}
	for _, m := range c.Members {
		sidecars[m.Name] = s.start(t, c, m)
	}
	load := etcdtest.StartLoad(t, cli)

	// uploaderIs waits until the sidecar beside the leader, and only it,
	// uploads.
	uploaderIs := func(leader string) {
		t.Helper()
		start := time.Now()
		waitFor(t, "only "+leader+"'s sidecar uploads", 5*time.Second, func() bool {
			for name, r := range sidecars {
				if r.sc.Uploader() != (name == leader) {
					return false
				}
			}
			return true
		})
		t.Logf("%s's sidecar uploads, %s after the leader moved", leader, time.Since(start).Round(time.Millisecond))
	}
	uploaderIs(c.Leader().Name)
	time.Sleep(500 * time.Millisecond)

	// A follower forwards a mutating call to the uploader.
	var follower string
	for _, m := range c.Members {
		if m != c.Leader() {
			follower = m.Name
		}
	}
	var full sidecar.SnapshotView
	code, h := call(t, "POST", sidecars[follower].srv.URL+"/v1/snapshots/full", token, "", &full)
	if code != http.StatusOK || full.Kind != "Full" || h.Get("X-Etcdkit-Forwarded") == "" {
		t.Fatalf("full through follower %s: %d %+v, forwarded to %q", follower, code, full, h.Get("X-Etcdkit-Forwarded"))
	}

	for range 2 {
		old := c.Leader()
		st, err := member.Inspect(ctx, cli, member.InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var target member.Status
		for _, m := range st {
			if m.Name != old.Name {
				target = m
			}
		}
		if _, err := old.Client(t).MoveLeader(ctx, target.ID); err != nil {
			t.Fatal(err)
		}
		uploaderIs(target.Name)
		time.Sleep(time.Second)
	}
	load.Check(t)
	for _, r := range sidecars {
		r.stop()
	}

	cat, err := snapshot.List(ctx, s.st)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := cat.Latest()
	if err != nil {
		t.Fatal(err)
	}
	checked, err := chain.Check()
	if err != nil {
		t.Fatalf("the chain the sidecars wrote: %v", err)
	}
	t.Logf("chain: full at %d, %d deltas to %d (%d before the check)", checked.Full.LastRevision, len(checked.Deltas), checked.LastRevision(), len(chain.Deltas))
	rep, err := restore.Verify(ctx, s.st, restore.VerifyOptions{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	live, err := restore.LiveDigest(ctx, cli, rep.Digest.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if live != rep.Digest {
		t.Fatalf("the backup at revision %d sums %+v, the live cluster %+v", rep.Digest.Revision, rep.Digest, live)
	}
	if last, err := cli.Get(ctx, "x"); err != nil || rep.Digest.Revision != last.Header.Revision {
		t.Fatalf("the backup ends at %d, the cluster is at %d: the last delta is missing (%v)", rep.Digest.Revision, last.Header.Revision, err)
	}
}
