package history

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/restore"
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
	// Read reads the backups; its Target picks the revision or time.
	Read restore.ReadOptions
	// Keys are the keys read.
	Keys Keys
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
	res, err := restore.Replay(ctx, st, opts.Read, restore.ReplayOptions{WorkDir: opts.WorkDir, What: "read"}, func(p *restore.Past) (err error) {
		if kvs, err = read(ctx, p, opts.Keys, p.Revision()); err == nil {
			leases = p.LeaseTTLs(kvs)
		}
		return err
	})
	if err != nil {
		return State{}, err
	}
	return State{Chain: res.Chain, Revision: res.Revision, KVs: kvs, Leases: leases}, nil
}

// ReadStates reads the keys picked at revision from and at the revision
// opts' target picks (a diff's two sides). Where the later side's chain
// holds from (its full is at or before it), one replay serves both: the
// replayed database keeps every revision since its full. Otherwise each
// side is replayed on its own, as ReadState does.
func ReadStates(ctx context.Context, st store.Store, opts StateOptions, from int64) (State, State, error) {
	src := opts.Read
	st = restore.Site(ctx, st, src)
	chain, err := restore.Chain(ctx, st, src.Target)
	if err != nil {
		return State{}, State{}, err
	}
	if from < chain.Full.LastRevision || from > chain.LastRevision() {
		return readApart(ctx, st, opts, from)
	}
	src.Chain = &chain
	var a, b []*mvccpb.KeyValue
	res, err := restore.Replay(ctx, st, src, restore.ReplayOptions{WorkDir: opts.WorkDir, What: "read"}, func(p *restore.Past) (err error) {
		if from > p.Revision() {
			return fmt.Errorf("revision %d is after the chain's last, %d", from, p.Revision())
		}
		if a, err = read(ctx, p, opts.Keys, from); err == nil {
			b, err = read(ctx, p, opts.Keys, p.Revision())
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
	earlier.Read.Target.Revision, earlier.Read.Target.Time = from, time.Time{}
	a, err := ReadState(ctx, st, earlier)
	if err != nil {
		return State{}, State{}, err
	}
	b, err := ReadState(ctx, st, opts)
	return a, b, err
}

// read ranges over the keys picked at revision at.
func read(ctx context.Context, p *restore.Past, k Keys, at int64) ([]*mvccpb.KeyValue, error) {
	var out []*mvccpb.KeyValue
	err := p.Range(ctx, k.start(), k.rangeEnd(), at, func(kvs []*mvccpb.KeyValue) { out = append(out, kvs...) })
	return out, err
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
