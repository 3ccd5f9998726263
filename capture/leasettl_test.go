package capture

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

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
	events := []snapshot.Event{{EtcdEvent: watchEvent(&clientv3.Event{Type: clientv3.EventTypePut, Kv: resp.Kvs[0]})}}
	var l leaseLog
	failed, stop := context.WithCancel(ctx)
	stop()
	if err := l.note(failed, EtcdDatastore(cli), &events[0]); err == nil || events[0].LeaseTTL != 0 {
		t.Fatalf("a question that cannot be asked: %v, TTL %d", err, events[0].LeaseTTL)
	}
	if err := l.noteAll(ctx, EtcdDatastore(cli), events); err != nil {
		t.Fatal(err)
	}
	if events[0].LeaseTTL != 7 {
		t.Fatalf("the TTL recorded before the delta: %d, want 7", events[0].LeaseTTL)
	}
}

// An uploader catching up meets thousands of new leases; their questions
// go together (half the cost where the CPU has room). The first question
// here waits until a second one is asked, so asking one after another
// fails it.
func TestLeaseQuestionsGoTogether(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := leasedEvents(ctx, t, cli, 16, func(i int) int64 { return int64(10 + i) })

	var (
		mu       sync.Mutex
		asked    int
		together = make(chan struct{})
		closed   bool
	)
	meet := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Lease/LeaseTimeToLive" {
			mu.Lock()
			if asked++; asked >= 2 && !closed {
				closed = true
				close(together)
			}
			mu.Unlock()
			select {
			case <-together:
			case <-ctx.Done():
				return fmt.Errorf("no second question came while this one was asked: %w", ctx.Err())
			}
		}
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	asker, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second, Context: ctx,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(meet)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = asker.Close() }()

	var l leaseLog
	if err := l.noteAll(ctx, EtcdDatastore(asker), events); err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		if want := int64(10 + i); ev.LeaseTTL != want {
			t.Errorf("%s: TTL %d, want %d", ev.EtcdEvent.Kv.Key, ev.LeaseTTL, want)
		}
	}
}

// BenchmarkLeaseQuestions asks the TTLs of 1,000 leases (each with one
// key, as Kubernetes events) one after another and as noteAll does, on a
// 3-member TLS cluster through a follower, as an uploader beside a
// follower asks: go test -run - -bench LeaseQuestions ./capture
func BenchmarkLeaseQuestions(b *testing.B) {
	c := etcdtest.Start(b, etcdtest.Options{Members: 3, TLS: true, UnsafeNoFsync: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.WaitLeader(ctx); err != nil {
		b.Fatal(err)
	}
	cli := c.Client(b)
	const n = 1000
	events := leasedEvents(ctx, b, cli, n, func(int) int64 { return 600 })
	var follower *etcdtest.Member
	for _, m := range c.Members {
		if m != c.Leader() {
			follower = m
		}
	}
	fcli := follower.Client(b)
	for _, limit := range []int{1, askers} {
		b.Run(fmt.Sprintf("in-flight=%d", limit), func(b *testing.B) {
			for b.Loop() {
				asked := slices.Clone(events)
				var l leaseLog
				if err := l.noteUpTo(ctx, EtcdDatastore(fcli), asked, limit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/lease")
		})
	}
}

// leasedEvents puts n keys, each on a lease of its own with the TTL ttl(i),
// as Kubernetes events, and returns their put events in key order.
func leasedEvents(ctx context.Context, t testing.TB, cli *clientv3.Client, n int, ttl func(i int) int64) []snapshot.Event {
	t.Helper()
	for i := range n {
		lease, err := cli.Grant(ctx, ttl(i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/events/ev-%04d", i), "x", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Get(ctx, "/registry/events/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != n {
		t.Fatalf("the events' keys: %d, %v", len(resp.Kvs), err)
	}
	events := make([]snapshot.Event, n)
	for i, kv := range resp.Kvs {
		events[i] = snapshot.Event{EtcdEvent: watchEvent(&clientv3.Event{Type: clientv3.EventTypePut, Kv: kv})}
	}
	return events
}
