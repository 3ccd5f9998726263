package restore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/mvcc"

	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Keys picks keys: one, every key with a prefix, or (zero value) all.
type Keys struct {
	Key    string
	Prefix bool
}

// rangeEnd is the mvcc range end of k: nil for one key, an empty slice
// for every key from k on.
func (k Keys) rangeEnd() []byte {
	switch {
	case !k.Prefix && k.Key != "":
		return nil
	case k.Key == "":
		return []byte{}
	}
	return []byte(clientv3.GetPrefixRangeEnd(k.Key))
}

func (k Keys) start() []byte {
	if k.Key == "" {
		return []byte{0}
	}
	return []byte(k.Key)
}

// StateOptions configures ReadState. The zero value reads every key of the
// latest state, replayed in a directory under os.TempDir().
type StateOptions struct {
	// Source's Target picks the revision or time.
	Source
	Keys
	// WorkDir holds the chain while it is replayed. Default os.TempDir().
	WorkDir string
}

// State is the keyspace, or a part of it, at one revision, read from the
// backups.
type State struct {
	Chain    snap.Chain
	Revision int64
	// KVs are sorted by key.
	KVs []*mvccpb.KeyValue
	// Leases are the TTLs (seconds, as granted) of the leases KVs are
	// attached to, by lease ID; ReadState fills them in.
	Leases map[int64]int64
}

// ReadState replays the chain the target asks for in a scratch directory,
// as Verify does, and reads the keys picked at the revision reached. The
// cluster is never touched.
func ReadState(ctx context.Context, st store.Store, opts StateOptions) (State, error) {
	var (
		kvs    []*mvccpb.KeyValue
		leases map[int64]int64
	)
	res, err := inScratch(ctx, st, opts.Source, opts.WorkDir, "read", func(r *replayer) (err error) {
		if kvs, err = r.read(ctx, opts.Keys, r.at); err == nil {
			leases = r.leaseTTLs(kvs)
		}
		return err
	})
	if err != nil {
		return State{}, err
	}
	return State{Chain: res.Chain, Revision: res.Revision, KVs: kvs, Leases: leases}, nil
}

// leaseTTLs are the granted TTLs of the leases kvs are attached to, as the
// replayed database holds them at its last revision.
func (r *replayer) leaseTTLs(kvs []*mvccpb.KeyValue) map[int64]int64 {
	out := map[int64]int64{}
	for _, kv := range kvs {
		if kv.Lease == 0 {
			continue
		}
		if _, ok := out[kv.Lease]; ok {
			continue
		}
		if l := r.lessor.Lookup(lease.LeaseID(kv.Lease)); l != nil {
			out[kv.Lease] = l.TTL()
		}
	}
	return out
}

// ReadStates reads the keys picked at revision from and at the revision
// opts' target picks (a diff's two sides). Where the later side's chain
// holds from (its full is at or before it), one replay serves both: the
// replayed database keeps every revision since its full. Otherwise each
// side is replayed on its own, as ReadState does.
func ReadStates(ctx context.Context, st store.Store, opts StateOptions, from int64) (State, State, error) {
	src := opts.withDefaults()
	chain, err := Chain(ctx, st, src.Target)
	if err != nil {
		return State{}, State{}, err
	}
	if from < chain.Full.LastRevision || from > chain.LastRevision() {
		return readApart(ctx, st, opts, from)
	}
	src.Chain = &chain
	var a, b []*mvccpb.KeyValue
	res, err := inScratch(ctx, st, src, opts.WorkDir, "read", func(r *replayer) (err error) {
		if from > r.at {
			return fmt.Errorf("revision %d is after the chain's last, %d", from, r.at)
		}
		if a, err = r.read(ctx, opts.Keys, from); err == nil {
			b, err = r.read(ctx, opts.Keys, r.at)
		}
		return err
	})
	if err != nil {
		return State{}, State{}, err
	}
	return State{Chain: res.Chain, Revision: from, KVs: a}, State{Chain: res.Chain, Revision: res.Revision, KVs: b}, nil
}

// readApart reads the two sides of ReadStates in a replay each.
func readApart(ctx context.Context, st store.Store, opts StateOptions, from int64) (State, State, error) {
	earlier := opts
	earlier.Target.Revision, earlier.Target.Time = from, time.Time{}
	a, err := ReadState(ctx, st, earlier)
	if err != nil {
		return State{}, State{}, err
	}
	b, err := ReadState(ctx, st, opts)
	return a, b, err
}

// read ranges over the keys picked at revision at.
func (r *replayer) read(ctx context.Context, k Keys, at int64) ([]*mvccpb.KeyValue, error) {
	var out []*mvccpb.KeyValue
	err := r.each(ctx, k, at, func(kvs []*mvccpb.KeyValue) { out = append(out, kvs...) })
	return out, err
}

// each hands the keys picked at revision at to f a page at a time, in key
// order.
func (r *replayer) each(ctx context.Context, k Keys, at int64, f func([]*mvccpb.KeyValue)) error {
	key, end := k.start(), k.rangeEnd()
	for {
		tr := r.store().Read(mvcc.ConcurrentReadTxMode, untraced())
		res, err := tr.Range(ctx, key, end, mvcc.RangeOptions{Limit: page, Rev: at})
		tr.End()
		if err != nil {
			return fmt.Errorf("range at revision %d: %w", at, err)
		}
		f(res.KVs)
		if end == nil || len(res.KVs) < page {
			return nil
		}
		key = append(bytes.Clone(res.KVs[len(res.KVs)-1].Key), 0)
	}
}

// Change is one key's difference between two states: From is nil when
// the key was created, To when it was deleted.
type Change struct {
	Key      string
	From, To *mvccpb.KeyValue
}

// Diff is what changed from state a to state b: each key created, deleted,
// or put again (a new mod revision), in key order.
func Diff(a, b State) []Change {
	var out []Change
	i, j := 0, 0
	for i < len(a.KVs) || j < len(b.KVs) {
		switch {
		case j == len(b.KVs) || i < len(a.KVs) && bytes.Compare(a.KVs[i].Key, b.KVs[j].Key) < 0:
			out = append(out, Change{Key: string(a.KVs[i].Key), From: a.KVs[i]})
			i++
		case i == len(a.KVs) || bytes.Compare(a.KVs[i].Key, b.KVs[j].Key) > 0:
			out = append(out, Change{Key: string(b.KVs[j].Key), To: b.KVs[j]})
			j++
		default:
			if a.KVs[i].ModRevision != b.KVs[j].ModRevision {
				out = append(out, Change{Key: string(a.KVs[i].Key), From: a.KVs[i], To: b.KVs[j]})
			}
			i++
			j++
		}
	}
	return out
}

// UndeleteOptions configures Undelete. The zero value is a dry run.
type UndeleteOptions struct {
	// Apply writes; without it Undelete only reports what it would write.
	Apply bool
}

// Undeleted is what Undelete did, or would do, with each key of the past
// state; each list is in key order.
type Undeleted struct {
	// Written: absent from the live cluster, and written back (or, in a
	// dry run, to be written).
	Written []string
	// Same: the live key holds the past value already.
	Same []string
	// Changed: the live key holds another value, or was created between
	// the check and the write; it is left as it is.
	Changed []string
	// WithoutLease: written keys that had a lease in the past; they are
	// written without one, since that lease has long expired or been
	// revoked.
	WithoutLease []string
}

// Undelete writes the keys of a past state back into the live cluster
// where they are absent, each in a transaction guarded on the key still
// being absent, so nothing written meanwhile is ever overwritten. A key
// that exists with another value is reported, not touched.
func Undelete(ctx context.Context, cli *clientv3.Client, past State, opts UndeleteOptions) (Undeleted, error) {
	var u Undeleted
	for _, kv := range past.KVs {
		key := string(kv.Key)
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return u, fmt.Errorf("undelete %q: %w", key, err)
		}
		if len(resp.Kvs) > 0 {
			if bytes.Equal(resp.Kvs[0].Value, kv.Value) {
				u.Same = append(u.Same, key)
			} else {
				u.Changed = append(u.Changed, key)
			}
			continue
		}
		if opts.Apply {
			txn, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, string(kv.Value))).Commit()
			if err != nil {
				return u, fmt.Errorf("undelete %q: %w", key, err)
			}
			if !txn.Succeeded {
				u.Changed = append(u.Changed, key)
				continue
			}
		}
		u.Written = append(u.Written, key)
		if kv.Lease != 0 {
			u.WithoutLease = append(u.WithoutLease, key)
		}
	}
	return u, nil
}
