package etcdtest

import (
	"context"
	"maps"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/member"
)

// Voters fails the test unless the cluster cli reaches has n members, all
// voting and healthy, one leader among them; it returns their status.
func Voters(t testing.TB, cli *clientv3.Client, n int) []member.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := member.Inspect(ctx, cli, member.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaders := 0
	for _, s := range st {
		if s.Learner || !s.Healthy() {
			t.Fatalf("member %s: learner=%v err=%v", s.Name, s.Learner, s.Err)
		}
		if s.Leader {
			leaders++
		}
	}
	if len(st) != n || leaders != 1 {
		t.Fatalf("%d members with %d leaders, want %d with 1: %+v", len(st), leaders, n, st)
	}
	return st
}

// WaitSameData waits, for at most 30 s, until m holds what the cluster
// holds at the cluster's revision, read from m alone.
func (c *Cluster) WaitSameData(t testing.TB, m *Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, rev, err := ReadAll(ctx, c.Client(t), "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	mc := m.Client(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _, err := ReadAll(ctx, mc, "/", rev, clientv3.WithSerializable())
		if err == nil && maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %s at revision %d: %d keys (err %v), the cluster has %d", m.Name, rev, len(got), err, len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
