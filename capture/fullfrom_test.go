package capture_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/snapshot"
)

// With FromFollower, the leader's uploader streams its fulls from a
// follower (over TLS, as the backup user), each full holds every revision
// written before it, and the chain restores to the live keyspace. Without
// a follower the full streams from the uploader's own member.
func TestFullsFromAFollower(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, TLS: true, Auth: true, UnsafeNoFsync: true})
	leader := c.Leader()
	cfg := c.ClientConfig()
	cfg.Endpoints = []string{leader.ClientURL.String()}
	cli, err := etcdclient.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var mu sync.Mutex
	var from []string
	follower := capture.FromFollower(cli, cfg)
	fullFrom := func(ctx context.Context) (*clientv3.Client, func(), error) {
		fc, release, err := follower(ctx)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			from = append(from, "error: "+err.Error())
		} else {
			from = append(from, fc.Endpoints()...)
		}
		return fc, release, err
	}
	st := newStore(t)
	s := start(t, cli, st, capture.Options{DeltaPeriod: 100 * time.Millisecond, FullFrom: fullFrom})
	s.Await(t, capture.OpFull)
	res, err := (etcdtest.Workload{Ops: 300, Seed: 3, DeletePercent: 10, TxnPercent: 10, LeasePercent: 10}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	full, err := s.TakeFull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if full.LastRevision < res.LastRevision {
		t.Fatalf("the follower's full is of revision %d; %d was written before it", full.LastRevision, res.LastRevision)
	}
	if _, err := (etcdtest.Workload{Ops: 100, Seed: 4}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	s.Stop(t)
	checkChain(t, cli, st, snapshot.Codec{})
	mu.Lock()
	defer mu.Unlock()
	if len(from) != 2 {
		t.Fatalf("fulls streamed from %v, want two followers", from)
	}
	for _, ep := range from {
		if ep == leader.ClientURL.String() || !slices.Contains(c.Endpoints(), ep) {
			t.Fatalf("a full streamed from %q: not a follower (leader %s, members %v)", ep, leader.ClientURL.String(), c.Endpoints())
		}
	}

	// One member: no follower, the full comes from it.
	one := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	ocli := one.Client(t)
	from = nil
	mu.Unlock()
	follower = capture.FromFollower(ocli, one.ClientConfig())
	s = start(t, ocli, newStore(t), capture.Options{DeltaPeriod: time.Hour, FullFrom: fullFrom})
	if r := s.Await(t, capture.OpFull); r.Err != nil {
		t.Fatal(r.Err)
	}
	s.Stop(t)
	mu.Lock()
	if len(from) != 1 || from[0] != "error: "+member.ErrNoFollower.Error() {
		t.Fatalf("one member's full: FullFrom said %v", from)
	}
}
