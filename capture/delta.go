package capture

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

var (
	// ErrCompacted means the revisions after the last stored one are
	// compacted away: only a full snapshot can continue the backups.
	ErrCompacted = errors.New("the next revision to capture is compacted: take a full snapshot")
	// ErrNoEvents means there was nothing to write: a delta is never empty.
	ErrNoEvents = errors.New("no events since the last snapshot")
)

// eventSize approximates what one buffered event costs: its bytes plus the
// structs and pointers around them, so a stream of tiny events is bounded too.
func eventSize(ev *snapshot.WatchEvent) int64 {
	n := int64(256)
	if kv := ev.Kv; kv != nil {
		n += int64(len(kv.Key) + len(kv.Value))
	}
	if kv := ev.PrevKv; kv != nil {
		n += int64(len(kv.Key) + len(kv.Value))
	}
	return n
}

// DeltaOptions configures delta capture. The zero value writes plain
// deltas and buffers up to 100 MiB of events.
type DeltaOptions struct {
	Codec snapshot.Codec
	// Source is what the client reaches. Default snapshot.SourceEtcd.
	Source snapshot.SourceKind
	// MemoryLimit bounds the events held in memory: buffered plus being
	// uploaded. Default 100 MiB.
	MemoryLimit int64
	// BeforeUpload, when set, is called right before a delta is written; an
	// error keeps the events buffered and fails the write (fencing).
	BeforeUpload func(context.Context, snapshot.Snapshot) error
	// Logger: nil discards.
	Logger *slog.Logger
	// Now stamps names and events. Default: time.Now.
	Now func() time.Time
}

func (o DeltaOptions) memoryLimit() int64 {
	if o.MemoryLimit <= 0 {
		return 100 << 20
	}
	return o.MemoryLimit
}

// Delta writes the events after revision since up to the cluster's current
// revision: one delta, or several when they exceed the memory limit. It
// returns ErrNoEvents when there are none and ErrCompacted when since+1 is
// compacted.
func Delta(ctx context.Context, cli *clientv3.Client, st store.Store, since int64, opts DeltaOptions) ([]snapshot.Snapshot, error) {
	c := newCapture(cli, st, since, opts)
	defer c.stop()
	var written []snapshot.Snapshot
	err := c.drain(ctx, 0, func(s snapshot.Snapshot, _ int) { written = append(written, s) })
	return written, err
}

// capture watches the whole keyspace from the revision after the last
// stored one and buffers the events until they are written as a delta.
// One batch may be uploading while the next one fills; together they stay
// under the memory limit. At the limit the watch stops, which leaves the
// backlog to etcd (its history) instead of the client's unbounded watch
// buffer: memory stays at the limit plus a constant whatever the write rate
// and however slow the store.
type capture struct {
	cli  *clientv3.Client
	src  Datastore
	st   store.Store
	opts DeltaOptions
	log  *slog.Logger
	// timeline, when set, is the one the deltas are written on: their
	// names are never dated before it began (snapshot.Timeline.Stamp).
	timeline *snapshot.Timeline

	last    int64 // the newest revision stored
	pending []snapshot.Event
	size    int64
	// inflight is the batch being uploaded, after last and before pending.
	inflight     []snapshot.Event
	inflightSize int64

	cancel  context.CancelFunc
	ch      clientv3.WatchChan
	watches int

	leases leaseLog
	auth   authLog
	// heard is the newest revision a progress notification said the
	// watch had sent every event up to, from a datastore behind etcd's API
	// (kine), whose revisions may hold no event a watch is sent: none may
	// come at the revision a drain targets.
	heard int64
}

func newCapture(cli *clientv3.Client, st store.Store, last int64, opts DeltaOptions) *capture {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	src := NewDatastore(opts.Source, cli, DatastoreOptions{Logger: opts.Logger})
	return &capture{cli: cli, src: src, st: st, opts: opts, log: opts.Logger, last: last}
}

// next is the first revision not yet captured.
func (c *capture) next() int64 {
	if n := len(c.pending); n > 0 {
		return c.pending[n-1].Revision() + 1
	}
	if n := len(c.inflight); n > 0 {
		return c.inflight[n-1].Revision() + 1
	}
	return c.last + 1
}

// full: buffered and uploading events reached the limit.
func (c *capture) full() bool { return c.size+c.inflightSize >= c.opts.memoryLimit() }

// due: the buffer holds half the limit, so it is written while the other
// half fills.
func (c *capture) due() bool { return c.size >= c.opts.memoryLimit()/2 }

// watching is the watch channel, nil while stopped, so a select on it
// blocks instead of spinning.
func (c *capture) watching() clientv3.WatchChan { return c.ch }

// start opens the watch at next() unless it is open or the buffer is full.
func (c *capture) start(ctx context.Context) {
	if c.ch != nil || c.full() {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	// The client shares one gRPC stream among watches with the same
	// metadata, and a watch opened while the previous one's stream closes
	// is closed with it: a stream of its own per watch avoids that.
	c.watches++
	wctx = metadata.AppendToOutgoingContext(wctx, "etcdkit-watch", strconv.Itoa(c.watches))
	c.ch = c.src.Watch(wctx, c.next())
}

func (c *capture) stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.cancel, c.ch = nil, nil
}

// add buffers a watch response. Events at or below what is already held
// are dropped: they come again after a full snapshot moved the chain
// ahead of the watch.
func (c *capture) add(ctx context.Context, wr clientv3.WatchResponse) error {
	if wr.CompactRevision != 0 {
		c.stop()
		return fmt.Errorf("watch from revision %d (compacted at %d): %w", c.next(), wr.CompactRevision, ErrCompacted)
	}
	if err := wr.Err(); err != nil {
		c.stop()
		if errors.Is(err, rpctypes.ErrCompacted) {
			return fmt.Errorf("watch from revision %d: %w", c.next(), ErrCompacted)
		}
		return fmt.Errorf("watch from revision %d: %w", c.next(), err)
	}
	if wr.IsProgressNotify() && c.src.Kind() == snapshot.SourceEtcdAPI {
		// Only there: every revision of etcd's holds events, which the
		// watch delivers, and the drain waits for them.
		c.heard = max(c.heard, wr.Header.Revision)
	}
	received := c.opts.Now().UTC()
	from := c.next()
	held := len(c.pending)
	for _, ev := range wr.Events {
		rev := ev.Kv.GetModRevision()
		if rev < from {
			continue
		}
		if ev.Type == mvccpb.PUT && ev.Kv.Version == 0 {
			// A datastore that keeps no versions (kine): etcd reads version
			// 0 as an absent key, and the logical full records 1.
			ev.Kv.Version = 1
		}
		// At the first event of a new revision past the limit, the rest of
		// the response is dropped and fetched again after the flush: the
		// buffer holds whole revisions and at most one past the limit, even
		// when a response catching up from history carries a thousand.
		if rev >= c.next() && c.full() {
			break
		}
		e := watchEvent(ev)
		c.pending = append(c.pending, snapshot.Event{EtcdEvent: e, Time: received})
		c.size += eventSize(e)
	}
	if err := c.leases.noteAll(ctx, c.src, c.pending[held:]); err != nil {
		c.log.Debug("delta: the TTL of a lease is not known yet", "error", err)
	}
	if c.full() {
		c.stop()
	}
	return nil
}

// currentRevision is the cluster's revision now, which must not be below
// what the store holds. A cluster that does not answer within seconds is
// gone (a sidecar stopping beside its stopped member asks last), and the
// caller writes what it holds rather than wait out its whole budget.
func (c *capture) currentRevision(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rev, err := c.src.Revision(ctx)
	if err != nil {
		return 0, err
	}
	if rev < c.last {
		return 0, fmt.Errorf("the cluster is at revision %d but the backups reach %d: they belong to another cluster, or it was restored without a revision bump", rev, c.last)
	}
	return rev, nil
}

// catchUp buffers events until target, the memory limit, or the time
// until once it holds events (zero: no time).
func (c *capture) catchUp(ctx context.Context, target int64, until time.Time) error {
	for c.next() <= target && c.heard < target && !c.full() {
		if !until.IsZero() && len(c.pending) > 0 && !time.Now().Before(until) {
			return nil
		}
		c.start(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wr, ok := <-c.watching():
			if !ok {
				c.stop()
				return fmt.Errorf("watch from revision %d: closed", c.next())
			}
			if err := c.add(ctx, wr); err != nil {
				return err
			}
		}
	}
	return nil
}

// drain writes every event up to the cluster's current revision, as
// drainTo does.
func (c *capture) drain(ctx context.Context, every time.Duration, written func(s snapshot.Snapshot, events int)) error {
	target, err := c.currentRevision(ctx)
	if err != nil {
		return err
	}
	return c.drainTo(ctx, target, every, written)
}

// drainTo writes every event up to target and none after it, in as many
// deltas as the memory limit needs, calling written after each, and a
// delta at least every period while it catches up (0: no period). An
// uploader far behind the cluster (a new leader's, after a quorum loss)
// once caught up the delta closing its chain for 11 s without trying the
// store: a store down meanwhile went unreported, and nothing of those
// seconds was stored until the end.
func (c *capture) drainTo(ctx context.Context, target int64, every time.Duration, written func(s snapshot.Snapshot, events int)) error {
	if c.last >= target {
		return ErrNoEvents
	}
	wrote := false
	for {
		var until time.Time
		if every > 0 {
			until = time.Now().Add(every)
		}
		if err := c.catchUp(ctx, target, until); err != nil {
			return err
		}
		// The watch stops while uploading: etcd, not the client, holds
		// what comes meanwhile.
		c.stop()
		if c.heard >= target && (len(c.pending) == 0 || c.pending[0].Revision() > target) {
			// The revisions up to target left hold no events.
			if wrote {
				return nil
			}
			return ErrNoEvents
		}
		s, events, err := c.flushTo(ctx, target)
		if err != nil {
			return err
		}
		written(s, events)
		wrote = true
		if c.last >= target {
			return nil
		}
	}
}

// flush writes the buffered events as one delta. The buffer only ever
// ends at a whole revision (see add), so a delta always holds whole
// revisions.
func (c *capture) flush(ctx context.Context) (snapshot.Snapshot, error) {
	s, _, err := c.flushTo(ctx, 0)
	return s, err
}

// flushTo writes the buffered events up to revision upTo (0: all) as one
// delta and returns how many events it held.
func (c *capture) flushTo(ctx context.Context, upTo int64) (snapshot.Snapshot, int, error) {
	snap, events, err := c.take(upTo)
	if err != nil {
		return snapshot.Snapshot{}, 0, err
	}
	snap, a, err := c.upload(ctx, snap, events)
	c.landed(snap, a, err)
	return snap, len(events), err
}

// take moves the buffered events up to revision upTo (0: all) to the
// in-flight batch and names its delta.
func (c *capture) take(upTo int64) (snapshot.Snapshot, []snapshot.Event, error) {
	if len(c.inflight) > 0 {
		return snapshot.Snapshot{}, nil, errors.New("a delta is already being written")
	}
	n := len(c.pending)
	if upTo > 0 {
		n = 0
		for n < len(c.pending) && c.pending[n].Revision() <= upTo {
			n++
		}
	}
	if n == 0 {
		return snapshot.Snapshot{}, nil, ErrNoEvents
	}
	last := c.pending[n-1].Revision()
	created := c.opts.Now()
	if c.timeline != nil {
		created = c.timeline.Stamp(created)
	}
	snap := snapshot.NewDelta(c.last+1, last, created, c.opts.Codec)
	var size int64
	for _, ev := range c.pending[:n] {
		size += eventSize(ev.EtcdEvent)
	}
	c.inflight, c.inflightSize = c.pending[:n:n], size
	c.pending, c.size = c.pending[n:], c.size-size
	return snap, c.inflight, nil
}

// upload writes a taken batch and returns it with its size and what it
// added to its last event. It touches nothing of c but what does not
// change and the lease and auth logs (which lock), and of the batch, which
// is its own until it landed, only the TTLs still missing, so it may run
// on another goroutine.
func (c *capture) upload(ctx context.Context, snap snapshot.Snapshot, events []snapshot.Event) (snapshot.Snapshot, snapshot.Annotations, error) {
	if c.opts.BeforeUpload != nil {
		if err := c.opts.BeforeUpload(ctx, snap); err != nil {
			return snap, snapshot.Annotations{}, fmt.Errorf("snapshot %s: not uploaded: %w", snap.Key, err)
		}
	}
	// Asked again: a lease's first question may have failed under a
	// fault, and a lease with one key (an Event's) has no next event to
	// ask with. Unknown is not written as absent: a restore would grant
	// the lease the unknown-lease TTL, an hour, and keep its keys (a
	// lock's, a 4 s Event's) far longer than they were granted. The
	// upload fails and is retried; once etcd answers again, a lease gone
	// meanwhile is recorded as gone.
	if err := c.leases.noteAll(ctx, c.src, events); err != nil {
		return snap, snapshot.Annotations{}, fmt.Errorf("snapshot %s: not uploaded: the TTL of a lease its events put keys with is not known (etcd does not answer): %w", snap.Key, err)
	}
	a := c.annotate(ctx, events[len(events)-1].Revision())
	var err error
	if snap.Size, err = snapshot.WriteDelta(ctx, c.st, snap, c.opts.Codec, events, a); err != nil {
		return snap, a, err
	}
	c.log.Info("delta snapshot written", "key", snap.Key, "events", len(events), "revisions", fmt.Sprintf("%d-%d", snap.StartRevision, snap.LastRevision))
	return snap, a, nil
}

// askTimeout bounds annotate's questions together.
const askTimeout = 10 * time.Second

// annotate asks etcd what a delta ending at revision last adds. What it
// adds is recorded with a later delta when etcd does not answer, so the
// questions never take the time the write itself needs: at most
// askTimeout, and half of what ctx has left (a stop without quorum has
// only its own deadline to write what was received).
func (c *capture) annotate(ctx context.Context, last int64) snapshot.Annotations {
	var a snapshot.Annotations
	if c.src.Kind() == snapshot.SourceEtcdAPI {
		// It lists no leases and serves no auth API (kine): a restore
		// learns of a revocation by its keys' deletions alone.
		return a
	}
	bound := askTimeout
	if deadline, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(deadline)/2)
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var err error
	if a.Revoked, err = c.leases.revoked(ctx, c.cli, last); err != nil {
		c.log.Debug("delta: leases not listed; revocations are recorded with a later delta", "error", err)
	}
	a.Auth, err = c.auth.changed(ctx, c.cli)
	switch {
	case c.auth.deniedOnce(err):
		c.log.Warn("delta: users and roles are not recorded: the backup's etcd user needs the root role to read them; a restore brings back those of the full snapshot", "error", err)
	case err != nil:
		c.log.Debug("delta: users and roles not read; recorded with a later delta", "error", err)
	}
	return a
}

// landed ends an upload: the batch is stored, or back in front of the
// buffer, with the annotations it was written with, to be written again.
func (c *capture) landed(snap snapshot.Snapshot, a snapshot.Annotations, err error) {
	if err == nil {
		c.last = snap.LastRevision
	} else {
		c.pending = append(c.inflight, c.pending...)
		c.size += c.inflightSize
		if n := len(c.inflight); n > 0 {
			a.Apply(&c.pending[n-1])
		}
	}
	c.inflight, c.inflightSize = nil, 0
}

// reset drops every event held: they may be another past's. No batch may
// be in flight.
func (c *capture) reset() {
	clear(c.pending)
	c.pending, c.size, c.last, c.heard = nil, 0, 0, 0
}

// moveTo restarts the chain after a full snapshot at rev: buffered events
// it holds are dropped and the next delta starts at rev+1. No batch may be
// in flight.
func (c *capture) moveTo(rev int64) {
	keep := c.pending[:0]
	var size int64
	for _, ev := range c.pending {
		if ev.Revision() > rev {
			keep = append(keep, ev)
			size += eventSize(ev.EtcdEvent)
		}
	}
	clear(c.pending[len(keep):])
	c.pending, c.size, c.last = keep, size, rev
}
