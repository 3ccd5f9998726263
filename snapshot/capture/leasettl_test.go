package capture

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
)

// A lease whose TTL etcd did not tell when its only key was put (the
// question failed under a fault) is asked again before the delta is
// written: an Event's lease has no next key to ask with.
func TestALeaseTTLUnknownAtItsKeyIsAskedBeforeTheDelta(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := cli.Grant(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, "/registry/events/ev-1", "x", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/registry/events/ev-1", clientv3.WithRev(put.Header.Revision))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the event's key: %v %v", resp, err)
	}
	events := []snapshot.Event{{EtcdEvent: &clientv3.Event{Type: clientv3.EventTypePut, Kv: resp.Kvs[0]}}}
	var l leaseLog
	failed, stop := context.WithCancel(ctx)
	stop()
	if err := l.note(failed, cli, &events[0]); err == nil || events[0].LeaseTTL != 0 {
		t.Fatalf("a question that cannot be asked: %v, TTL %d", err, events[0].LeaseTTL)
	}
	if err := l.fill(ctx, cli, events); err != nil {
		t.Fatal(err)
	}
	if events[0].LeaseTTL != 7 {
		t.Fatalf("the TTL recorded before the delta: %d, want 7", events[0].LeaseTTL)
	}
}
