package soak

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func hashValue(v []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(v)
	return h.Sum64()
}

// event is one change of history, as the record's watch saw it.
type event struct {
	rev   int64
	del   bool
	key   string
	state keyState
}

// ack is one write the cluster acknowledged, with the revision it gave.
type ack struct {
	at    time.Time
	rev   int64
	key   string
	del   bool
	value uint64
}

// record is the harness's own account of history: every acknowledged
// write and every event of a watch from the first revision. Every check
// compares etcdkit's work with it.
type record struct {
	mu       sync.Mutex
	events   []event
	progress int64 // every event up to this revision is in events
	acks     []ack
	reads    []read
	leases   map[int64]int64 // granted: ID → TTL
	keys     map[string]string
	broken   error
	changed  chan struct{}
}

// read is a linearizable read and what it returned.
type read struct {
	rev     int64
	key     string
	present bool
	state   keyState
}

func newRecord() *record {
	return &record{leases: map[int64]int64{}, keys: map[string]string{}, changed: make(chan struct{})}
}

// intern keeps one copy of each key: a long run writes the same keys
// millions of times.
func (r *record) intern(k []byte) string {
	if s, ok := r.keys[string(k)]; ok {
		return s
	}
	s := string(k)
	r.keys[s] = s
	return s
}

// watch follows every key from revision 1 until ctx ends, resuming after
// the last event seen whenever the stream breaks (a member killed, a
// partition). The harness never compacts past the record's progress, so a
// resumed watch never misses an event; if it would, the record says so.
func (r *record) watch(ctx context.Context, cli *clientv3.Client) {
	next := int64(1)
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		ch := cli.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(next), clientv3.WithProgressNotify())
		progress := time.NewTicker(500 * time.Millisecond)
	stream:
		for {
			select {
			case resp, ok := <-ch:
				if !ok {
					break stream
				}
				if err := resp.Err(); err != nil {
					if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision > 0 {
						r.fail(fmt.Errorf("the record's watch lost history: compacted at %d, it needed %d", resp.CompactRevision, next))
						cancel()
						progress.Stop()
						return
					}
					break stream
				}
				r.mu.Lock()
				for _, ev := range resp.Events {
					kv := ev.Kv
					e := event{rev: kv.ModRevision, key: r.intern(kv.Key), del: ev.Type == mvccpb.DELETE}
					if !e.del {
						e.state = keyState{value: hashValue(kv.Value), create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version, ls: kv.Lease}
					}
					r.events = append(r.events, e)
					next = kv.ModRevision + 1
				}
				// A response carries every event of its revisions; a
				// progress notification says nothing more is coming below
				// its header's revision.
				if len(resp.Events) > 0 {
					r.progress = max(r.progress, next-1)
				} else if resp.IsProgressNotify() {
					r.progress = max(r.progress, resp.Header.Revision)
					next = max(next, resp.Header.Revision+1)
				}
				close(r.changed)
				r.changed = make(chan struct{})
				r.mu.Unlock()
			case <-progress.C:
				_ = cli.RequestProgress(wctx)
			}
		}
		progress.Stop()
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *record) fail(err error) {
	r.mu.Lock()
	if r.broken == nil {
		r.broken = err
	}
	r.mu.Unlock()
}

// reach waits until the record holds every event up to rev.
func (r *record) reach(ctx context.Context, rev int64) error {
	for {
		r.mu.Lock()
		p, ch, broken := r.progress, r.changed, r.broken
		r.mu.Unlock()
		if broken != nil {
			return broken
		}
		if p >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("the record's watch reached revision %d, not %d: %w", p, rev, ctx.Err())
		}
	}
}

func (r *record) progressRev() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress
}

func (r *record) acked(a ack) {
	r.mu.Lock()
	r.acks = append(r.acks, a)
	r.mu.Unlock()
}

func (r *record) granted(id, ttl int64) {
	r.mu.Lock()
	r.leases[id] = ttl
	r.mu.Unlock()
}

func (r *record) leaseTTL(id int64) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ttl, ok := r.leases[id]
	return ttl, ok
}

// stateAt replays the recorded events up to rev.
func (r *record) stateAt(rev int64) map[string]keyState {
	r.mu.Lock()
	evs := r.events
	r.mu.Unlock()
	s := map[string]keyState{}
	for _, e := range evs {
		if e.rev > rev {
			break
		}
		if e.del {
			delete(s, e.key)
		} else {
			s[e.key] = e.state
		}
	}
	return s
}

// checkAcks compares every acknowledged write and linearizable read with
// the watch's history, up to the record's progress; it returns how many it
// checked and the first few violations.
func (r *record) checkAcks() (int, []string) {
	r.mu.Lock()
	evs, acks, reads, progress := r.events, r.acks, r.reads, r.progress
	r.mu.Unlock()
	byRev := map[int64][]event{}
	for _, e := range evs {
		byRev[e.rev] = append(byRev[e.rev], e)
	}
	var bad []string
	n := 0
	for _, a := range acks {
		if a.rev > progress {
			continue
		}
		n++
		found := false
		for _, e := range byRev[a.rev] {
			if e.key == a.key && e.del == a.del && (a.del || e.state.value == a.value) {
				found = true
				break
			}
		}
		if !found && len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("acknowledged %s of %q at revision %d (at %s) is not in the watch's history: %v",
				map[bool]string{false: "put", true: "delete"}[a.del], a.key, a.rev, a.at.Format(time.RFC3339Nano), byRev[a.rev]))
		}
	}
	// Reads: sorted by revision, checked against one replay.
	sorted := append([]read(nil), reads...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].rev < sorted[j].rev })
	state := map[string]keyState{}
	i := 0
	for _, rd := range sorted {
		if rd.rev > progress {
			break
		}
		for ; i < len(evs) && evs[i].rev <= rd.rev; i++ {
			if evs[i].del {
				delete(state, evs[i].key)
			} else {
				state[evs[i].key] = evs[i].state
			}
		}
		n++
		want, ok := state[rd.key]
		if ok != rd.present || (ok && want != rd.state) {
			if len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("a read of %q at revision %d returned present=%v %v, history has present=%v %v", rd.key, rd.rev, rd.present, rd.state, ok, want))
			}
		}
	}
	return n, bad
}
