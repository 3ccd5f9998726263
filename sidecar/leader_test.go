package sidecar_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
)

// Three sidecars under a write load: only the one beside the leader
// uploads, it follows two leader moves, a follower forwards a snapshot
// request to it, and the chain they wrote together has no gap and
// restores to the live keyspace.
func TestUploaderFollowsTheLeader(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	s := newSetup(t)
	sidecars := map[string]*running{}
	for _, m := range c.Members {
		sidecars[m.Name] = s.start(t, c, m)
	}
	load := etcdtest.StartLoad(t, cli)

	// uploaderIs waits until the sidecar beside the leader, and only it,
	// is the uploader, and then until it placed the backups and uploaded
	// what the cluster wrote since (a sidecar stopped while it places
	// them leaves the rest to the next uploader: on a loaded machine that
	// took longer than a test's leader move).
	uploaderIs := func(leader string) {
		t.Helper()
		start := time.Now()
		etcdtest.Eventually(t, "only "+leader+"'s sidecar uploads", time.Minute, func() bool {
			for name, r := range sidecars {
				if r.sc.Uploader() != (name == leader) {
					return false
				}
			}
			return true
		})
		t.Logf("%s's sidecar uploads, %s after the leader moved", leader, time.Since(start).Round(time.Millisecond))
		now, err := cli.Get(context.Background(), "\x00", clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		etcdtest.Eventually(t, leader+"'s sidecar uploads past the move", time.Minute, func() bool {
			cat, err := snapshot.List(context.Background(), s.st)
			if err != nil {
				return false
			}
			chain, err := cat.Latest()
			return err == nil && chain.LastRevision() >= now.Header.Revision
		})
	}
	uploaderIs(c.Leader().Name)

	// A follower forwards a mutating call to the uploader.
	var follower string
	for _, m := range c.Members {
		if m != c.Leader() {
			follower = m.Name
		}
	}
	var full api.SnapshotView
	code, h := call(t, "POST", sidecars[follower].srv.URL+"/v1/snapshots/full", token, "", &full)
	if code != http.StatusOK || full.Kind != "Full" || h.Get("X-Etcdkit-Forwarded") == "" {
		t.Fatalf("full through follower %s: %d %+v, forwarded to %q", follower, code, full, h.Get("X-Etcdkit-Forwarded"))
	}

	for range 2 {
		uploaderIs(c.MoveLeader(t).Name)
	}
	load.Ran(t)
	for _, r := range sidecars {
		r.stop()
	}

	chain, rep := chaintest.Check(t, s.st, cli, chaintest.Options{Current: true})
	t.Logf("chain: full at %d, %d deltas to %d", chain.Full.LastRevision, len(chain.Deltas), rep.Digest.Revision)
}
