package snapshot

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseLog is what the capture recorded of the leases its events name:
// each one's granted TTL, asked of etcd once, so that a restore can grant
// the lease again. The watch loop adds to it and the upload forgets the
// leases etcd no longer holds, so it holds the leases alive, not every
// lease ever seen.
type leaseLog struct {
	mu  sync.Mutex
	ttl map[int64]int64
}

// note sets ev.LeaseTTL when ev puts a key with a lease not recorded yet.
// A lease etcd does not know any more (expired since) is recorded without
// a TTL: its keys' deletions follow in the stream. A failed question is
// asked again with the lease's next event.
func (l *leaseLog) note(ctx context.Context, cli *clientv3.Client, ev *Event) error {
	id := ev.EtcdEvent.GetKv().GetLease()
	if id == 0 || ev.EtcdEvent.Type != 0 {
		return nil
	}
	l.mu.Lock()
	_, known := l.ttl[id]
	l.mu.Unlock()
	if known {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return err
	}
	ttl := max(resp.GrantedTTL, 0)
	if resp.TTL < 0 {
		ttl = 0
	}
	ev.LeaseTTL = ttl
	l.mu.Lock()
	if l.ttl == nil {
		l.ttl = map[int64]int64{}
	}
	l.ttl[id] = ttl
	l.mu.Unlock()
	return nil
}

// revoked forgets and returns the recorded leases etcd no longer holds.
func (l *leaseLog) revoked(ctx context.Context, cli *clientv3.Client) ([]int64, error) {
	l.mu.Lock()
	n := len(l.ttl)
	l.mu.Unlock()
	if n == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.Leases(ctx)
	if err != nil {
		return nil, err
	}
	alive := make(map[int64]bool, len(resp.Leases))
	for _, s := range resp.Leases {
		alive[int64(s.ID)] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var gone []int64
	for id := range l.ttl {
		if !alive[id] {
			gone = append(gone, id)
			delete(l.ttl, id)
		}
	}
	return gone, nil
}
