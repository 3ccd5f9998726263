package tenant

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"

	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
)

// ApplyOptions configures ApplyState. The zero value is a dry run that
// would write each key of the past state whose live value differs, and
// delete nothing.
type ApplyOptions struct {
	// Apply writes; without it ApplyState only reports what it would do.
	Apply bool
	// Replace also deletes the live keys under the prefix that the past
	// state does not hold, so that the prefix holds exactly the past.
	Replace bool
	// Rename writes the past keys under another prefix (and compares
	// them with the live keys there).
	Rename restore.Rename
	// KeyByKey writes each key in a Txn of its own, of the three forms
	// kine serves (create: the key's absence; update and delete: its mod
	// revision, reading it otherwise), for a datastore behind etcd's API.
	// The prefix may then be "" (the whole keyspace: such a datastore has
	// no data dir to restore), and the datastore's own bookkeeping key
	// (kine's compact_rev_key) is neither written nor deleted.
	KeyByKey bool
	// Writers is how many Txns of one key are in flight with KeyByKey: a
	// datastore behind etcd's API takes one write per round trip, and a
	// restore of a whole keyspace one key at a time would wait out every
	// round trip in turn. Default DefaultWriters.
	Writers int
	// beforeWrite runs between the read of the live keys and the first
	// write: a test's concurrent writer.
	beforeWrite func()
}

// Applied is what ApplyState did, or in a dry run would do, to each key;
// every list is in key order and names the keys as written (renamed).
type Applied struct {
	// Revision is the live cluster's revision its keys were read at.
	Revision int64
	// Created: absent live, written.
	Created []string
	// Overwritten: live with another value, written with the past one.
	Overwritten []string
	// Same: live with the past value already; left as it is.
	Same []string
	// Deleted: live keys the past did not hold, deleted (Replace).
	Deleted []string
	// Extra: live keys the past did not hold, left (no Replace).
	Extra []string
	// Conflicts: keys another writer changed between the read and the
	// write; each write is guarded on the key's mod revision as read, so
	// these were left as that writer made them.
	Conflicts []string
	// Leases the keys written are attached to (or would be): the past
	// state's, under their IDs, granted again with their TTLs where the
	// cluster no longer held them.
	Leases int
	// WithoutLease: keys written without the lease they had, whose TTL
	// the backups do not record.
	WithoutLease []string
}

// applyBatch bounds a transaction of ApplyState: etcd refuses more than
// 128 operations (--max-txn-ops) and requests over 1.5 MiB by default.
const (
	applyBatchOps   = 64
	applyBatchBytes = 1 << 20
)

// liveKey is what the live cluster held at a key when it was read.
type liveKey struct {
	value      []byte
	mod, lease int64
}

// ApplyState writes a past state of the keys under prefix (read from the
// backups with ReadState and Keys{Key: prefix, Prefix: true}) into a live
// cluster: each key whose live value differs is written, each absent one
// created, and with Replace each live key under the prefix that the past
// did not hold deleted. Every write and delete is guarded by a Txn on the
// mod revision the key had when read, so a concurrent writer is never
// overwritten blindly: its keys are reported as conflicts. A key with a
// lease is attached to it under its ID, granted again with its TTL where
// the cluster no longer holds it (a key the same but for its lease is
// written again). Nothing outside the prefix (renamed) is read or
// touched, so a role with read and write on it is enough.
func ApplyState(ctx context.Context, cli *clientv3.Client, past history.State, prefix string, opts ApplyOptions) (Applied, error) {
	if prefix == "" && !opts.KeyByKey {
		return Applied{}, errors.New("apply a past state: a prefix is required (every key of a cluster is a restore's, not this)")
	}
	if err := opts.Rename.Check(prefix); err != nil {
		return Applied{}, err
	}
	if r := opts.Rename; opts.Replace && r != (restore.Rename{}) && (strings.HasPrefix(r.To, r.From) || strings.HasPrefix(r.From, r.To)) {
		return Applied{}, fmt.Errorf("rename %s=%s with replace: the prefixes overlap, so the keys under %s that the past did not hold would include the past's own keys; rename to a prefix apart", r.From, r.To, r.To)
	}
	var a Applied
	b := &applier{cli: cli, opts: opts, past: past, out: &a, leases: map[int64]int64{}}
	return b.apply(ctx, prefix)
}

// datastoreKey is kine's record of its own compaction, which its API
// shows as a key: a restore through the API leaves it to the datastore.
const datastoreKey = "compact_rev_key"

// apply is ApplyState's work, into b.out.
func (b *applier) apply(ctx context.Context, prefix string) (Applied, error) {
	a, opts := b.out, b.opts
	live, rev, err := readLive(ctx, b.cli, opts.Rename.Of(prefix))
	if err != nil {
		return *a, err
	}
	a.Revision = rev
	if opts.beforeWrite != nil {
		opts.beforeWrite()
	}
	seen := map[string]bool{}
	for _, kv := range b.past.KVs {
		key := string([]byte(opts.Rename.Of(string(kv.Key))))
		seen[key] = true
		if opts.KeyByKey && key == datastoreKey {
			continue
		}
		l, ok := live[key]
		switch {
		case !ok:
			err = b.put(ctx, key, kv, 0, &a.Created)
		case bytes.Equal(l.value, kv.Value) && l.lease == b.leaseOf(kv):
			a.Same = append(a.Same, key)
		default:
			err = b.put(ctx, key, kv, l.mod, &a.Overwritten)
		}
		if err != nil {
			return *a, err
		}
	}
	for _, key := range sortedKeys(live) {
		if seen[key] || opts.KeyByKey && key == datastoreKey {
			continue
		}
		if !opts.Replace {
			a.Extra = append(a.Extra, key)
			continue
		}
		if err := b.del(ctx, key, live[key].mod); err != nil {
			return *a, err
		}
	}
	if err := b.flush(ctx); err != nil {
		return *a, err
	}
	if opts.Apply && opts.KeyByKey {
		if err := b.readBack(ctx, prefix); err != nil {
			return *a, err
		}
	}
	a.Leases = len(b.leases)
	return *a, nil
}

// readBack reads the keys written key by key again. kine over SQLite
// without _txlock=immediate (k3s passes it; kine's own default does not)
// answers success to concurrent creates it then drops: a write that left
// its key as it was read (still absent, or at the mod revision guarded on)
// is tried again alone, twice at most; one that another writer changed
// since is a conflict.
func (b *applier) readBack(ctx context.Context, prefix string) error {
	for try := 1; len(b.written) > 0; try++ {
		live, _, err := readLive(ctx, b.cli, b.opts.Rename.Of(prefix))
		if err != nil {
			return fmt.Errorf("read the keys written back: %w", err)
		}
		var lost []guarded
		for _, g := range b.written {
			l, ok := live[g.key]
			switch {
			case g.op.IsDelete() && !ok, !g.op.IsDelete() && ok && bytes.Equal(l.value, g.op.ValueBytes()):
			case !ok && g.mod == 0, ok && l.mod == g.mod:
				lost = append(lost, g)
			default:
				*g.into = slices.DeleteFunc(*g.into, func(k string) bool { return k == g.key })
				b.out.Conflicts = append(b.out.Conflicts, g.key)
			}
		}
		if len(lost) > 0 && try == 3 {
			return fmt.Errorf("the datastore answered success to %d writes it does not hold, such as %q, three times: it loses writes "+
				"(kine over SQLite needs _txlock=immediate in its endpoint, as k3s gives it)", len(lost), lost[0].key)
		}
		for _, g := range lost {
			if _, err := b.commit(ctx, []guarded{g}); err != nil {
				return err
			}
		}
		b.written = lost
	}
	return nil
}

// readLive reads the live keys under prefix, a page at a time, all at the
// revision of the first page.
func readLive(ctx context.Context, cli *clientv3.Client, prefix string) (map[string]liveKey, int64, error) {
	out := map[string]liveKey{}
	end := clientv3.GetPrefixRangeEnd(prefix)
	key := prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(readPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, key, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("read the live keys under %q: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			out[string(kv.Key)] = liveKey{value: kv.Value, mod: kv.ModRevision, lease: kv.Lease}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

func sortedKeys(m map[string]liveKey) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // as etcd sorts keys: by their bytes
	return keys
}

// applier gathers guarded writes into transactions of a batch each.
type applier struct {
	cli  *clientv3.Client
	opts ApplyOptions
	past history.State
	out  *Applied
	// leases are the past leases the keys written are attached to, granted
	// again under their IDs where the cluster did not hold them, by the
	// ID the cluster gave (kine numbers a lease by its TTL).
	leases map[int64]int64
	// leased, when set, is told of each lease the keys written are
	// attached to: granted, or held by the cluster already.
	leased func(id int64, granted bool)
	ops    []guarded
	bytes  int
	// With KeyByKey: the writes in flight or done, in order, those that
	// succeeded (read back at the end), the writers' slots, and whether
	// one failed.
	inflight []*each
	written  []guarded
	slots    chan struct{}
	writers  sync.WaitGroup
	failed   atomic.Bool
}

// guarded is one write of a batch, with the list it lands in if it
// succeeds.
type guarded struct {
	key  string
	mod  int64
	cmp  clientv3.Cmp
	op   clientv3.Op
	into *[]string
}

func (b *applier) put(ctx context.Context, key string, kv *mvccpb.KeyValue, mod int64, into *[]string) error {
	var opts []clientv3.OpOption
	if kv.Lease != 0 {
		id, err := b.lease(ctx, kv.Lease)
		if err != nil {
			return err
		}
		if id != 0 {
			opts = append(opts, clientv3.WithLease(clientv3.LeaseID(id)))
		} else {
			b.out.WithoutLease = append(b.out.WithoutLease, key)
		}
	}
	return b.add(ctx, guarded{key: key, mod: mod, cmp: clientv3.Compare(clientv3.ModRevision(key), "=", mod),
		op: clientv3.OpPut(key, string(kv.Value), opts...), into: into}, len(key)+len(kv.Value))
}

func (b *applier) del(ctx context.Context, key string, mod int64) error {
	return b.add(ctx, guarded{key: key, mod: mod, cmp: clientv3.Compare(clientv3.ModRevision(key), "=", mod),
		op: clientv3.OpDelete(key), into: &b.out.Deleted}, len(key))
}

// leaseOf is the lease kv is written with: its own, unless the backups
// hold no TTL of it.
func (b *applier) leaseOf(kv *mvccpb.KeyValue) int64 {
	if _, ok := b.past.Leases[kv.Lease]; ok {
		return kv.Lease
	}
	return 0
}

// lease makes the past lease live in the cluster for its keys: granted
// once, under its own ID and with its TTL, unless the cluster holds it,
// and returns the ID its keys are written with. A lease the backups hold
// no TTL of is none (0): its keys go without.
func (b *applier) lease(ctx context.Context, past int64) (int64, error) {
	if id, ok := b.leases[past]; ok {
		return id, nil
	}
	ttl, ok := b.past.Leases[past]
	if !ok {
		return 0, nil
	}
	id := past
	if b.opts.Apply {
		// Under the past lease's own ID: a tenant's clients keep their
		// leases alive by ID, and where the lease still lives (a restore
		// into its own cluster) its keys join it again. kine answers with
		// an ID of its own (the TTL), which its keys then carry.
		resp, err := clientv3.RetryLeaseClient(b.cli).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: past, TTL: ttl})
		exists := errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist)
		if err != nil && !exists {
			return 0, fmt.Errorf("grant lease %x of %d s for its keys: %w", past, ttl, err)
		}
		if err == nil && resp.ID != 0 {
			id = resp.ID
		}
		if b.leased != nil {
			b.leased(id, !exists)
		}
	}
	b.leases[past] = id
	return id, nil
}

func (b *applier) add(ctx context.Context, g guarded, size int) error {
	if !b.opts.Apply {
		*g.into = append(*g.into, g.key)
		return nil
	}
	if b.opts.KeyByKey {
		return b.addEach(ctx, g)
	}
	if len(b.ops) == applyBatchOps || len(b.ops) > 0 && b.bytes+size > applyBatchBytes {
		if err := b.flush(ctx); err != nil {
			return err
		}
	}
	b.ops = append(b.ops, g)
	b.bytes += size
	return nil
}

// flush commits the batch in one transaction guarded on every key; when
// a guard fails, each key is tried on its own, so that only the keys
// another writer changed are left.
func (b *applier) flush(ctx context.Context) error {
	if b.opts.KeyByKey {
		return b.flushEach()
	}
	ops := b.ops
	b.ops, b.bytes = nil, 0
	if len(ops) == 0 {
		return nil
	}
	ok, err := b.commit(ctx, ops)
	if err != nil {
		return err
	}
	if ok {
		for _, g := range ops {
			*g.into = append(*g.into, g.key)
		}
		return nil
	}
	for _, g := range ops {
		ok, err := b.commit(ctx, []guarded{g})
		if err != nil {
			return err
		}
		if ok {
			*g.into = append(*g.into, g.key)
		} else {
			b.out.Conflicts = append(b.out.Conflicts, g.key)
		}
	}
	return nil
}

// DefaultWriters is ApplyOptions.Writers' default.
const DefaultWriters = 16

// each is one write of a KeyByKey apply in flight, and how it ended.
type each struct {
	g   guarded
	ok  bool
	err error
}

// addEach starts g's Txn at once, with up to opts.Writers in flight:
// the writers never wait for each other (a datastore's slow write, kine's
// hundreds of milliseconds now and then, holds up its own key alone).
func (b *applier) addEach(ctx context.Context, g guarded) error {
	if err := b.eachErr(); err != nil {
		return err
	}
	if b.slots == nil {
		b.slots = make(chan struct{}, cmp.Or(max(b.opts.Writers, 0), DefaultWriters))
	}
	e := &each{g: g}
	b.inflight = append(b.inflight, e)
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		b.writers.Wait()
		return ctx.Err()
	}
	b.writers.Go(func() {
		defer func() { <-b.slots }()
		e.ok, e.err = b.commit(ctx, []guarded{g})
		if e.err != nil {
			b.failed.Store(true)
		}
	})
	return nil
}

// eachErr is the first failed write's error, once one failed.
func (b *applier) eachErr() error {
	if !b.failed.Load() {
		return nil
	}
	b.writers.Wait()
	for _, e := range b.inflight {
		if e.err != nil {
			return e.err
		}
	}
	return nil
}

// flushEach waits for every write in flight and lists them in the order
// they were made.
func (b *applier) flushEach() error {
	b.writers.Wait()
	if err := b.eachErr(); err != nil {
		return err
	}
	for _, e := range b.inflight {
		if e.ok {
			*e.g.into = append(*e.g.into, e.g.key)
			b.written = append(b.written, e.g)
		} else {
			b.out.Conflicts = append(b.out.Conflicts, e.g.key)
		}
	}
	b.inflight = nil
	return nil
}

func (b *applier) commit(ctx context.Context, ops []guarded) (bool, error) {
	cmps := make([]clientv3.Cmp, len(ops))
	then := make([]clientv3.Op, len(ops))
	for i, g := range ops {
		cmps[i], then[i] = g.cmp, g.op
	}
	txn := b.cli.Txn(ctx).If(cmps...).Then(then...)
	if b.opts.KeyByKey && ops[0].mod != 0 {
		txn = txn.Else(clientv3.OpGet(ops[0].key))
	}
	resp, err := txn.Commit()
	if st, ok := status.FromError(err); ok && !b.opts.KeyByKey && strings.Contains(st.Message(), "unsupported") {
		return false, fmt.Errorf("write %d keys from %q on: the endpoints take no Txn of several keys: a datastore behind etcd's API such as kine? "+
			"restore into it with --to-source etcd-api (ApplyOptions.KeyByKey): %w", len(ops), ops[0].key, err)
	}
	if err != nil {
		return false, fmt.Errorf("write %d keys from %q on: %w", len(ops), ops[0].key, err)
	}
	return resp.Succeeded, nil
}

// readPage is how many live keys one read returns.
const readPage = 1000
