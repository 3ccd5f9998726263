package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// ExtendOptions configures Extend. The zero value copies and deletes
// nothing.
type ExtendOptions struct {
	// GCFrom, when set, is when the extensions began (etcd-druid's task's
	// creation, etcd-backup-restore's --gc-from-timestamp): the copies of
	// the latest full's revision created since then, but the new one, are
	// deleted once it is written. The full the cluster took before it
	// hibernated (the first of these revisions) is never deleted here,
	// even when GCFrom is before it.
	GCFrom time.Time
	// Logger: nil discards.
	Logger *slog.Logger
	// Now names the copy. Default: time.Now.
	Now func() time.Time
}

// ExtendResult is what Extend did.
type ExtendResult struct {
	// From is the full copied, To the copy.
	From, To Snapshot
	// OnServer: the store copied it on its server, no byte through this
	// process (store.Copier).
	OnServer bool
	// DeltasAfter are the deltas of From's chain: the copy does not renew
	// their locks.
	DeltasAfter int
	// Deleted are the earlier copies GCFrom let go; Locked those a lock
	// kept.
	Deleted, Locked []Snapshot
	Took            time.Duration
}

// Extend renews the lock of a hibernated cluster's backups on a
// write-once bucket: it copies the newest timeline's latest full to a new
// name (the same revisions, now's time), whose lock starts now, with its
// cluster identity. The store copies it on its server where it can, so
// no object byte passes through this process. The copy continues the
// chain as its source would: a cluster that resumes appends to it.
func Extend(ctx context.Context, st store.Store, opts ExtendOptions) (ExtendResult, error) {
	start := time.Now()
	log := logger(opts.Logger)
	cat, err := List(ctx, st)
	if err != nil {
		return ExtendResult{}, err
	}
	if cat, err = cat.On(""); err != nil {
		return ExtendResult{}, err
	}
	latest, err := cat.Latest()
	if err != nil {
		return ExtendResult{}, fmt.Errorf("extend: %w", err)
	}
	from := latest.Full
	res := ExtendResult{From: from, DeltasAfter: len(latest.Deltas)}
	created := time.Unix(now(opts.Now).Unix(), 0).UTC()
	if !created.After(from.Created) {
		// Two copies in one second would share a name.
		created = from.Created.Add(time.Second)
	}
	// The same revisions, codec and suffixes; a v1 full's copy is v2.
	to := from
	to.Created, to.Size = created, 0
	to.Key = dirV2 + "/" + to.Name()
	if res.OnServer, err = store.CopyObject(ctx, st, from.Key, to.Key); err != nil {
		return res, fmt.Errorf("extend: copy %s to %s: %w", from.Key, to.Key, err)
	}
	res.To = to
	if id, ok, err := ReadIdentity(ctx, st, from); err == nil && ok {
		if err := WriteIdentity(ctx, st, to, id); err != nil && !errors.Is(err, store.ErrExists) {
			log.Warn("extend: the copy's cluster identity is not written; a sidecar reads the full itself", "key", to.Key, "error", err)
		}
	}
	if res.DeltasAfter > 0 {
		log.Warn("extend: deltas follow the latest full; their locks are not renewed (take a full snapshot before hibernating)",
			"full", from.Key, "deltas", res.DeltasAfter)
	}
	if !opts.GCFrom.IsZero() {
		// The first full of these revisions is the one the cluster took,
		// not a copy: kept whatever GCFrom says (a wrong one, such as 0).
		original := from
		for _, s := range cat.Fulls() {
			if s.LastRevision == from.LastRevision && s.Created.Before(original.Created) {
				original = s
			}
		}
		for _, s := range cat.Fulls() {
			if s.LastRevision != from.LastRevision || s.Created.Before(opts.GCFrom) || s.Key == to.Key || s.Key == original.Key {
				continue
			}
			switch err := st.Delete(ctx, s.Key); {
			case errors.Is(err, store.ErrLocked):
				res.Locked = append(res.Locked, s)
			case err != nil:
				return res, fmt.Errorf("extend: delete the earlier copy %s: %w", s.Key, err)
			default:
				_ = st.Delete(ctx, identityKey(s))
				res.Deleted = append(res.Deleted, s)
			}
		}
	}
	res.Took = time.Since(start)
	log.Info("extend: the latest full is copied; its lock starts now", "from", from.Key, "to", to.Key,
		"on_server", res.OnServer, "deleted", len(res.Deleted), "locked", len(res.Locked), "took", res.Took.Round(time.Millisecond))
	return res, nil
}
