package capture

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
)

// leaseLog is what the capture knows of etcd's leases, for a restore to
// grant them again: which ones had their TTL recorded with an event (asked
// of etcd once each), and which ones it watches for revocation (those, and
// the leases listed before a full snapshot or at start, whose revocation
// the watch shows only as deletions). The upload forgets the leases etcd
// no longer holds, so it holds the leases alive, not every one ever seen.
type leaseLog struct {
	mu       sync.Mutex
	recorded map[int64]bool
	tracked  map[int64]bool
	// gone are leases found revoked, by the revision etcd was at when it
	// said so: a revocation is written with the first delta that reaches
	// that revision, so that its keys' deletions come before it.
	gone map[int64]int64
}

// note sets ev.LeaseTTL when ev puts a key with a lease whose TTL is not
// recorded yet. A lease etcd does not know any more (expired or revoked
// since: a short lease seen by an uploader that catches up after a leader
// change) is marked snapshot.LeaseGone; its keys' deletions follow in the
// stream. A failed question is asked again with the lease's next event.
func (l *leaseLog) note(ctx context.Context, src Datastore, ev *snapshot.Event) error {
	id := leaseOf(ev)
	if id == 0 || ev.EtcdEvent.Type != 0 {
		return nil
	}
	l.mu.Lock()
	known := l.recorded[id]
	l.mu.Unlock()
	if known {
		return nil
	}
	ttl, err := src.LeaseTTL(ctx, id)
	if err != nil {
		return err
	}
	ev.LeaseTTL = ttl
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recorded = setOf(l.recorded, id)
	l.tracked = setOf(l.tracked, id)
	return nil
}

// askers bounds the TTL questions in flight. An uploader catching up after
// a leader change or a quorum loss meets a new lease in about one event of
// five (Kubernetes events, locks), each question a round trip to the
// leader: eight at a time halve their cost on a machine with CPU to spare
// (BenchmarkLeaseQuestions); on a saturated one they cost the same.
const askers = 8

// noteAll is note for the puts of events whose TTL is not recorded: one
// question per lease (its first event carries the TTL), up to askers at a
// time. After a failure no question starts (etcd that does not answer one
// answers no other, and each waits its own 5 s, which the caller would
// wait too); it returns that failure, and what is left is asked again
// with a later event or left to the restore's guess.
func (l *leaseLog) noteAll(ctx context.Context, src Datastore, events []snapshot.Event) error {
	return l.noteUpTo(ctx, src, events, askers)
}

// noteUpTo is noteAll with at most limit questions in flight.
func (l *leaseLog) noteUpTo(ctx context.Context, src Datastore, events []snapshot.Event, limit int) error {
	var ask []*snapshot.Event
	l.mu.Lock()
	asked := map[int64]bool{}
	for i := range events {
		ev := &events[i]
		id := leaseOf(ev)
		if id == 0 || ev.EtcdEvent.Type != 0 || ev.LeaseTTL != 0 || l.recorded[id] || asked[id] {
			continue
		}
		asked[id] = true
		ask = append(ask, ev)
	}
	l.mu.Unlock()
	actx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	slots := make(chan struct{}, limit)
	for _, ev := range ask {
		select {
		case slots <- struct{}{}:
		case <-actx.Done():
		}
		if actx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := l.note(actx, src, ev); err != nil {
				once.Do(func() { first = err; stop() })
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// track watches the leases etcd holds now for revocation: called before a
// full snapshot, they are all in it or in the deltas after it.
func (l *leaseLog) track(ctx context.Context, cli *clientv3.Client) error {
	resp, err := leases(ctx, cli)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range resp.Leases {
		l.tracked = setOf(l.tracked, int64(s.ID))
	}
	return nil
}

// revoked returns the tracked leases etcd no longer holds, for a delta
// that ends at revision last, and forgets them.
func (l *leaseLog) revoked(ctx context.Context, cli *clientv3.Client, last int64) ([]int64, error) {
	l.mu.Lock()
	n := len(l.tracked)
	l.mu.Unlock()
	var err error
	if n > 0 {
		err = l.list(ctx, cli)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for id, rev := range l.gone {
		if rev <= last {
			out = append(out, id)
			delete(l.gone, id)
		}
	}
	return out, err
}

// list moves the tracked leases etcd does not list any more to gone.
func (l *leaseLog) list(ctx context.Context, cli *clientv3.Client) error {
	resp, err := leases(ctx, cli)
	if err != nil {
		return err
	}
	alive := make(map[int64]bool, len(resp.Leases))
	for _, s := range resp.Leases {
		alive[int64(s.ID)] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.tracked {
		if !alive[id] {
			if l.gone == nil {
				l.gone = map[int64]int64{}
			}
			l.gone[id] = resp.GetRevision()
			delete(l.tracked, id)
			delete(l.recorded, id)
		}
	}
	return nil
}

func leases(ctx context.Context, cli *clientv3.Client) (*clientv3.LeaseLeasesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cli.Leases(ctx)
}

func setOf(m map[int64]bool, id int64) map[int64]bool {
	if m == nil {
		m = map[int64]bool{}
	}
	m[id] = true
	return m
}

// leaseOf is the lease of the event's key, or 0.
func leaseOf(ev *snapshot.Event) int64 {
	if ev.EtcdEvent == nil || ev.EtcdEvent.Kv == nil {
		return 0
	}
	return ev.EtcdEvent.Kv.Lease
}
