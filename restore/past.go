package restore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdkit/etcdkit/internal/scratch"
	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// ReplayOptions configures Replay. The zero value replays under
// os.TempDir().
type ReplayOptions struct {
	// WorkDir holds the chain while it is replayed. Default os.TempDir().
	WorkDir string
	// What names the work in errors and the scratch directory. Default
	// "replay".
	What string
	// ReleasePages releases the database's mapped pages as the replay goes:
	// for a reader that reads the whole database once more after it (a
	// chain's compaction), whose passes would otherwise leave the whole
	// file resident.
	ReleasePages bool
}

// Past is a chain replayed by Replay: the keyspace as the chain left it at
// its last revision, with every revision since its full, open for reading
// until read returns.
type Past struct {
	r *replayer
}

// Replay replays the chain src picks (its Target, or its Chain) in a
// scratch directory, as Restore does without building a data dir, hands
// the replayed past to read, and removes it all. The Result says what was
// replayed; Revision is the revision reached.
func Replay(ctx context.Context, st store.Store, src ReadOptions, o ReplayOptions, read func(*Past) error) (Result, error) {
	src = src.withDefaults()
	if o.What == "" {
		o.What = "replay"
	}
	var chain snap.Chain
	if src.Chain != nil {
		chain = *src.Chain
	} else {
		st = Site(ctx, st, src)
		var err error
		if chain, err = Chain(ctx, st, src.Target); err != nil {
			return Result{}, err
		}
	}
	work, release, err := scratch.Dir(o.WorkDir, "etcdkit-"+o.What+"-")
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", o.What, err)
	}
	defer release()
	src.unmap = o.ReleasePages
	res, r, err := replayChain(ctx, st, chain, filepath.Join(work, fullFile), work, src, true)
	if err != nil {
		return Result{}, err
	}
	p := &Past{r: r}
	err = read(p)
	if p.r != nil {
		if cerr := p.r.close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", o.What, err)
	}
	res.Revision = r.at
	return res, nil
}

// Revision is the last revision replayed.
func (p *Past) Revision() int64 { return p.r.at }

// page is how many keys one read of a past returns.
const page = 1000

// Range hands the keys from key to end (etcd's range end: nil for key
// alone, empty for every key from key on) at revision at to f a page at a
// time, in key order.
func (p *Past) Range(ctx context.Context, key, end []byte, at int64, f func([]*mvccpb.KeyValue)) error {
	r := p.r
	for {
		// The replay is over: its last batch is released before the
		// reads.
		r.release()
		kvs, err := r.b.Range(ctx, key, end, at, page)
		if err != nil {
			return err
		}
		f(kvs)
		if end == nil || len(kvs) < page {
			return nil
		}
		key = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
}

// LeaseTTLs are the granted TTLs (seconds) of the leases kvs are attached
// to, by lease ID, as the past holds them at its last revision.
func (p *Past) LeaseTTLs(kvs []*mvccpb.KeyValue) map[int64]int64 {
	out := map[int64]int64{}
	for _, kv := range kvs {
		if kv.Lease == 0 {
			continue
		}
		if _, ok := out[kv.Lease]; ok {
			continue
		}
		p.r.release()
		if ttl, ok := p.r.b.LeaseTTL(kv.Lease); ok {
			out[kv.Lease] = ttl
		}
	}
	return out
}

// Compact closes the past and writes its database as etcd leaves it after
// a compaction at the last revision and a defragmentation (of each key
// only its last revision) into a new file at path; the replayed database
// is removed. The past cannot be read after it.
func (p *Past) Compact(ctx context.Context, path string) error {
	r := p.r
	p.r = nil
	if err := r.close(); err != nil {
		return err
	}
	if err := compactCopy(ctx, r.path, path, r.at, nil); err != nil {
		return err
	}
	return os.Remove(r.path)
}
