package tenant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// MoveOptions configures Move. The zero value polls the store every
// second and cuts over when ctx ends, at the newest revision the deltas
// reach then.
type MoveOptions struct {
	// Read reads the backups (its Target is ignored: a move starts from
	// the latest state and follows the newest timeline's deltas).
	Read restore.ReadOptions
	// Prefix is the tenant's: the only keys read, written and followed.
	Prefix string
	// Rename writes them under another prefix in the target.
	Rename restore.Rename
	// WorkDir holds the chain while the first state is replayed. Default
	// os.TempDir().
	WorkDir string
	// Poll is how often the store is listed for new deltas. Default 1 s;
	// while cutting over, a tenth of it.
	Poll time.Duration
	// CutOver ends the following: once it is closed, Move waits for the
	// deltas to reach the cut-over revision, applies them and returns;
	// ctx ending then aborts the cut-over. nil: when ctx ends (the
	// cut-over then runs on a context of its own).
	CutOver <-chan struct{}
	// CutOverRevision is the source revision the target must hold at the
	// cut-over: the source cluster's current revision, read after the
	// tenant's writers stopped; the deltas are waited for until they
	// reach it.
	CutOverRevision func(context.Context) (int64, error)
	// Trigger asks the source's sidecar for a delta now (its API's POST
	// /v1/snapshots/delta), so the cut-over does not wait for the delta
	// period, and returns the revision that delta reaches (0: the sidecar
	// had nothing newer than its last upload). One of CutOverRevision and
	// Trigger is required: without either, the last delta cannot be
	// told from any other.
	Trigger func(context.Context) (int64, error)
	// CutOverTimeout bounds the cut-over. Default 2 min.
	CutOverTimeout time.Duration
	// Followed is called after each delta that was applied.
	Followed func(MoveProgress)
}

// MoveProgress is where a move stands.
type MoveProgress struct {
	// Revision is the source revision the target holds the prefix at.
	Revision int64
	// Delta is the last delta applied; Events how many events of the
	// prefix have been applied since the first state.
	Delta  string
	Events int64
}

// Moved reports a Move.
type Moved struct {
	// Loaded is what the first state's ApplyState wrote.
	Loaded Applied
	MoveProgress
	// Deltas applied after the first state.
	Deltas int
	// Leases the target holds for the prefix's keys, under the source's
	// lease IDs (LeasesGranted of them granted by this move, the others
	// held by the target already, an earlier move's): kept alive while
	// the move followed, then by the tenant's clients.
	Leases, LeasesGranted int
	// CutOverAt is the source revision the cut-over waited for;
	// LagClosed how many revisions the target was behind it when the
	// cut-over began, and CutOverTook how long it took from CutOver to the
	// last event applied: the tenant's downtime, if its writers stopped at
	// CutOver and move to the target when Move returns.
	CutOverAt, LagClosed int64
	CutOverTook          time.Duration
}

// withDefaults fills in the defaults and checks what a move needs.
func (o MoveOptions) withDefaults() (MoveOptions, error) {
	if o.Read.Logger == nil {
		o.Read.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.CutOverTimeout <= 0 {
		o.CutOverTimeout = 2 * time.Minute
	}
	if o.Prefix == "" {
		return o, errors.New("move: a prefix is required: the tenant's keys")
	}
	if err := o.Rename.Check(o.Prefix); err != nil {
		return o, fmt.Errorf("move: %w", err)
	}
	if o.CutOverRevision == nil && o.Trigger == nil {
		return o, errors.New("move: the cut-over needs the source's revision or its sidecar, to know which delta is the last")
	}
	return o, nil
}

// notTheSource refuses a target that is the cluster the backups were
// taken of: the first state would overwrite the tenant's keys there with
// the backups' older ones. Backups without an identity record
// (etcd-backup-restore's) cannot tell; a record that cannot be read, or a
// target that does not say which cluster it is, stops the move.
func notTheSource(ctx context.Context, st store.Store, chain snap.Chain, target *clientv3.Client) error {
	id, ok, err := snap.ReadIdentity(ctx, st, chain.Full)
	if err != nil {
		return fmt.Errorf("move: which cluster the backups are of: %w", err)
	}
	if !ok || id.ClusterID == "" {
		return nil
	}
	resp, err := target.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("move: which cluster the target is: %w", err)
	}
	if fmt.Sprintf("%x", resp.Header.ClusterId) == id.ClusterID {
		return fmt.Errorf("move: the target is cluster %s, the one the backups were taken of: a move copies a tenant to another cluster, "+
			"and here it would overwrite the tenant's keys with older ones (to bring back a past state in place, use restore --prefix --to)", id.ClusterID)
	}
	return nil
}

// Move copies a tenant's keys from the backups into a live target cluster
// and keeps them there as the source goes on: it applies the latest
// state (ApplyState with Replace, so the target's prefix holds exactly
// it), then each new delta's events under the prefix as they land on the
// store, until CutOver; then it waits for the deltas to reach the
// cut-over revision, applies them and returns. Until then the target's
// prefix is the move's: a key written there meanwhile is overwritten by
// the next event of the source.
func Move(ctx context.Context, st store.Store, target *clientv3.Client, opts MoveOptions) (Moved, error) {
	var m Moved
	opts, err := opts.withDefaults()
	if err != nil {
		return m, err
	}
	// The site whose newest chain is whole is the one followed.
	st = restore.Site(ctx, st, opts.Read)
	opts.Read.Secondary = nil
	chain, err := restore.Chain(ctx, st, restore.Target{})
	if err != nil {
		return m, fmt.Errorf("move: %w", err)
	}
	if err := notTheSource(ctx, st, chain, target); err != nil {
		return m, err
	}
	opts.Read.Chain = &chain
	past, err := history.ReadState(ctx, st, history.StateOptions{Read: opts.Read, Keys: history.Keys{Key: opts.Prefix, Prefix: true}, WorkDir: opts.WorkDir})
	if err != nil {
		return m, fmt.Errorf("move: read the first state: %w", err)
	}
	if past.Leases == nil {
		past.Leases = map[int64]int64{}
	}
	// The leases granted in the target live while the move follows: the
	// source's keep them, and its deltas delete their keys when they go.
	// From the cut-over on, the tenant's clients keep them alive, by the
	// same IDs.
	kctx, stopKeepAlive := context.WithCancel(context.WithoutCancel(ctx))
	defer stopKeepAlive()
	b := &applier{cli: target, opts: ApplyOptions{Apply: true, Replace: true, Rename: opts.Rename}, past: past, out: &m.Loaded, leases: map[int64]int64{},
		leased: func(id int64, granted bool) {
			m.Leases++
			if granted {
				m.LeasesGranted++
			}
			ch, err := target.KeepAlive(kctx, clientv3.LeaseID(id))
			if err != nil {
				opts.Read.Logger.Warn("move: keep a lease alive in the target", "lease", fmt.Sprintf("%x", id), "error", err)
				return
			}
			go func() {
				for range ch {
				}
			}()
		}}
	if m.Loaded, err = b.apply(ctx, opts.Prefix); err != nil {
		return m, fmt.Errorf("move: write the first state into the target: %w", err)
	}
	// The keys the target held as they were (an earlier move's) keep
	// their leases alive too.
	for id := range past.Leases {
		if _, err := b.lease(ctx, id); err != nil {
			return m, fmt.Errorf("move: the leases of the first state: %w", err)
		}
	}
	if n := len(m.Loaded.Deleted) + len(m.Loaded.Overwritten); n > 0 {
		opts.Read.Logger.Warn("move: the target's prefix held keys the source's latest state does not, or other values: made the source's",
			"deleted", len(m.Loaded.Deleted), "overwritten", len(m.Loaded.Overwritten))
	}
	if len(m.Loaded.Conflicts) > 0 {
		return m, fmt.Errorf("move: %d keys under the target's prefix were written while the first state was (%s …): the target's prefix must be the move's alone",
			len(m.Loaded.Conflicts), m.Loaded.Conflicts[0])
	}
	m.Revision = past.Revision
	opts.Read.Logger.Info("move: first state written into the target", "prefix", opts.Prefix, "revision", past.Revision,
		"keys", len(past.KVs), "created", len(m.Loaded.Created), "overwritten", len(m.Loaded.Overwritten), "deleted", len(m.Loaded.Deleted))
	f := &mover{st: st, opts: opts, full: chain.Full, m: &m, b: b}

	// Without CutOver, the end of ctx is the cut-over, not a failure.
	cutOver, cancelled := opts.CutOver, ctx.Done()
	if cutOver == nil {
		cutOver, cancelled = ctx.Done(), nil
	}
	tick := time.NewTicker(opts.Poll)
	defer tick.Stop()
	for {
		select {
		case <-cutOver:
			// Without CutOver, ctx ended to cut over: the cut-over runs on.
			base := ctx
			if opts.CutOver == nil {
				base = context.WithoutCancel(ctx)
			}
			cctx, cancel := context.WithTimeout(base, opts.CutOverTimeout)
			defer cancel()
			return m, f.cutOver(cctx)
		case <-cancelled:
			return m, ctx.Err()
		case <-tick.C:
			if _, err := f.poll(ctx); err != nil {
				opts.Read.Logger.Warn("move: follow the deltas", "revision", m.Revision, "error", err)
			}
		}
	}
}

// mover applies the deltas that continue the target's state.
type mover struct {
	st   store.Store
	opts MoveOptions
	full snap.Snapshot
	m    *Moved
	b    *applier
}

// cutOver waits for the deltas to reach the cut-over revision and
// applies them: the source's revision, or the revision the sidecar's delta
// on demand reached. When neither is known, the cut-over fails: a target
// short of the source's last writes must never be taken for whole.
func (f *mover) cutOver(ctx context.Context) error {
	start := time.Now()
	var want int64
	known := false
	if f.opts.CutOverRevision != nil {
		rev, err := f.opts.CutOverRevision(ctx)
		if err != nil {
			return fmt.Errorf("move: cut over: the source's revision: %w", err)
		}
		want, known = rev, true
	}
	if f.opts.Trigger != nil {
		rev, err := f.opts.Trigger(ctx)
		switch {
		case err == nil:
			// 0: nothing newer than the sidecar's last upload, which the
			// first poll reaches.
			want = max(want, rev)
		case !known:
			return fmt.Errorf("move: cut over: the sidecar took no delta on demand and the source's revision is unknown, so the last delta cannot be told (give the source's endpoints, or try again): %w", err)
		default:
			f.opts.Read.Logger.Warn("move: cut over: the sidecar took no delta on demand; waiting for its next to reach the source's revision", "revision", want, "error", err)
		}
	}
	from := f.m.Revision
	for first := true; ; first = false {
		reached, err := f.poll(ctx)
		if err != nil {
			return fmt.Errorf("move: cut over at revision %d: %w", want, err)
		}
		if want == 0 && first {
			want = reached
		}
		if f.m.Revision >= want {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("move: cut over: the deltas reached revision %d, not yet the source's %d: %w", f.m.Revision, want, ctx.Err())
		case <-time.After(f.opts.Poll / 10):
		}
	}
	f.m.CutOverAt, f.m.LagClosed, f.m.CutOverTook = want, max(0, want-from), time.Since(start)
	f.opts.Read.Logger.Info("move: cut over", "revision", f.m.Revision, "lag_closed", f.m.LagClosed, "took", f.m.CutOverTook.Round(time.Millisecond))
	return nil
}

// poll applies the deltas that continue the target's state and returns
// the revision they reach.
func (f *mover) poll(ctx context.Context) (int64, error) {
	cat, err := snap.List(ctx, f.st)
	if err != nil {
		return f.m.Revision, err
	}
	for _, d := range cat.Continuing(f.full, f.m.Revision) {
		if err := f.apply(ctx, d); err != nil {
			return f.m.Revision, err
		}
	}
	return f.m.Revision, nil
}

// apply writes a delta's events under the prefix into the target, in
// revision order: a transaction holds each key once.
func (f *mover) apply(ctx context.Context, d snap.Snapshot) error {
	r, err := snap.OpenDelta(ctx, f.st, d, f.opts.Read.Codec)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	var batch []clientv3.Op
	keys := map[string]bool{}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := f.b.cli.Txn(ctx).Then(batch...).Commit(); err != nil {
			return fmt.Errorf("delta %s: write %d events into the target: %w", d.Key, len(batch), err)
		}
		batch, keys = batch[:0], map[string]bool{}
		return nil
	}
	var events int64
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("delta %s: %w", d.Key, err)
		}
		if ev.EtcdEvent == nil {
			continue
		}
		kv := ev.EtcdEvent.Kv
		if kv == nil || !strings.HasPrefix(string(kv.Key), f.opts.Prefix) {
			continue
		}
		key := string([]byte(f.opts.Rename.Of(string(kv.Key))))
		if keys[key] || len(batch) == applyBatchOps {
			if err := flush(); err != nil {
				return err
			}
		}
		keys[key] = true
		events++
		if ev.EtcdEvent.Type == snap.Delete {
			batch = append(batch, clientv3.OpDelete(key))
			continue
		}
		var lease []clientv3.OpOption
		if kv.Lease != 0 {
			if _, known := f.b.past.Leases[kv.Lease]; !known && ev.LeaseTTL > 0 {
				f.b.past.Leases[kv.Lease] = ev.LeaseTTL
			}
			id, err := f.b.lease(ctx, kv.Lease)
			if err != nil {
				return err
			}
			if id != 0 {
				lease = append(lease, clientv3.WithLease(clientv3.LeaseID(id)))
			}
		}
		batch = append(batch, clientv3.OpPut(key, string(kv.Value), lease...))
	}
	if err := flush(); err != nil {
		return err
	}
	f.m.Revision, f.m.Delta, f.m.Events, f.m.Deltas = d.LastRevision, d.Key, f.m.Events+events, f.m.Deltas+1
	if f.opts.Followed != nil {
		f.opts.Followed(f.m.MoveProgress)
	}
	return nil
}
