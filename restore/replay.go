package restore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdkit/etcdkit/internal/database"
	"github.com/etcdkit/etcdkit/internal/datadir"
	"github.com/etcdkit/etcdkit/internal/etcdstorage"
	"github.com/etcdkit/etcdkit/snapshot"
)

// replayer applies delta events to an etcd database file: each event is
// written into the key bucket as etcd's mvcc store writes it (the key is
// its revision and its place in its transaction, the value the KeyValue
// the watch delivered, which is the one etcd stored), so every revision,
// create revision and version comes out as etcd made it. No mvcc store,
// no index, no lessor, no raft, no fsync per revision: a restored member
// builds its index from the key bucket when it starts, as it does after
// any restart. The events of a batch are written under one lock of the
// backend's transaction.
type replayer struct {
	path string
	b    *etcdstorage.Backend
	// at is the revision the database is at.
	at int64
	// until and untilTime end the replay (point-in-time restore).
	until     int64
	untilTime time.Time
	done      bool
	// cur gathers the events of revision curRev from delta curName, and
	// curRevoked the leases its deltas recorded as revoked by then.
	cur        []*snapshot.WatchEvent
	curRev     int64
	curName    string
	curRevoked []int64
	// leases are the leases the database holds; keyLease the lease of
	// each key that has one, and leaseKeys how many keys each lease has:
	// a lease recorded as revoked goes only when it has none.
	leases    map[int64]bool
	keyLease  map[string]int64
	leaseKeys map[int64]int
	// leaseTTL holds the TTLs the deltas recorded of leases not granted
	// yet; unknownTTL (seconds) is granted to the others, none when 0.
	leaseTTL   map[int64]int64
	unknownTTL int64
	// auth is the newest users and roles the replayed deltas recorded.
	auth *snapshot.Auth
	// slab holds the keys and values written in the open transaction:
	// bbolt keeps the slices it is given until it commits.
	slab []byte
	// file is the database, for starting the writeback of what the
	// commits wrote every writebackBytes written (written).
	file    *os.File
	written int64
	// applied counts revisions written; granted counts leases granted
	// with their recorded TTL, guessed those granted unknownTTL, dropped
	// the puts written without their lease.
	applied, grantedLeases, guessedLeases, droppedLeases int64
	progress                                             func(revisions int64)
	// torn: a revision failed part-written; the database may hold some
	// of its events.
	torn bool
	// logical: the database is a logical full's (snapshot.LogicalMarker),
	// whose datastore's revisions may skip numbers.
	logical bool
	// unmap: the replay releases the database's mapped pages every
	// unmapEvery (a compaction, whose passes would otherwise leave the
	// whole file resident); unmapped is when it last did.
	unmap    bool
	unmapped time.Time
}

const unmapEvery = 100 * time.Millisecond

// openReplayer opens the database at path, which is at revision rev.
func openReplayer(path string, rev, until int64, untilTime time.Time, unknownTTL time.Duration) *replayer {
	r := &replayer{path: path, b: etcdstorage.Open(path), at: rev, until: until, untilTime: untilTime,
		leases: map[int64]bool{}, keyLease: map[string]int64{}, leaseKeys: map[int64]int{},
		leaseTTL: map[int64]int64{}, unknownTTL: int64(max(unknownTTL, 0) / time.Second)}
	defer r.b.Unlock()
	marker, leases := r.b.Prepare([]byte(snapshot.LogicalMarker))
	r.logical = len(marker) > 0
	for _, id := range leases {
		r.leases[id] = true
	}
	if len(r.leases) > 0 {
		r.readKeyLeases()
	}
	return r
}

// readKeyLeases finds the keys of the database that have a lease: their
// revisions in order, the last of each key winning.
func (r *replayer) readKeyLeases() {
	r.b.ForEachRevision(func(k, v []byte) {
		key, id := keyAndLease(v)
		if database.Tombstone(k) {
			id = 0
		}
		r.attach(key, id)
	})
}

// release ends the open transaction's lock: after a batch of events, and
// before anything else uses the backend.
func (r *replayer) release() {
	if !r.b.Locked() {
		return
	}
	if r.unmap && time.Since(r.unmapped) >= unmapEvery {
		// Under the lock, so bbolt cannot remap meanwhile.
		_ = datadir.ReleaseMapped(filepath.Dir(r.path))
		r.unmapped = time.Now()
	}
	r.b.Unlock()
	// The disk writes what the commits wrote while the replay goes on,
	// instead of all of it at the final sync.
	if r.written >= writebackBytes {
		r.written = 0
		if r.file == nil {
			r.file, _ = os.Open(r.path)
		}
		if r.file != nil {
			datadir.StartWriteback(r.file)
		}
	}
}

const writebackBytes = 32 << 20

// close commits and closes everything; the file is then a plain etcd
// database again.
func (r *replayer) close() error {
	r.release()
	var err error
	if r.file != nil {
		err = r.file.Close()
	}
	return errors.Join(err, r.b.Close())
}

// feed replays one event of delta name. Events arrive in revision order;
// a revision's events are written together once the next revision (or
// flush) shows they are complete. Revisions the database already holds are
// skipped (deltas of two uploaders overlap).
func (r *replayer) feed(name string, ev snapshot.Event) error {
	rev := ev.Revision()
	if rev != r.curRev && len(r.cur) > 0 {
		if err := r.flush(); err != nil {
			return err
		}
	}
	if rev <= r.at || r.done {
		return nil
	}
	if r.until > 0 && rev > r.until || !r.untilTime.IsZero() && ev.Time.After(r.untilTime) {
		r.done = true
		return nil
	}
	switch {
	case ev.LeaseTTL > 0:
		r.leaseTTL[ev.EtcdEvent.Kv.Lease] = ev.LeaseTTL
	case ev.LeaseTTL == snapshot.LeaseGone:
		// Gone soon after: the shortest lease keeps its keys no longer
		// than they lived.
		r.leaseTTL[ev.EtcdEvent.Kv.Lease] = 1
	}
	r.curName, r.curRev = name, rev
	r.cur = append(r.cur, ev.EtcdEvent)
	r.curRevoked = append(r.curRevoked, ev.RevokedLeases...)
	r.noteAuth(ev)
	return nil
}

// apply replays the decoded batches until they end, the target is
// reached (done) or ctx ends, and calls delta after each delta's last
// revision. The backend may commit between batches, and a revision is
// always written whole within one, so what it commits ends at a whole
// revision.
func (r *replayer) apply(ctx context.Context, batches <-chan batch, delta func(name string)) error {
	defer r.release()
	for b := range batches {
		if b.err != nil {
			return b.err
		}
		for _, ev := range b.events {
			if err := r.feed(b.name, ev); err != nil {
				return err
			}
		}
		if b.end {
			if err := r.flush(); err != nil {
				return err
			}
			// A delta is named by its first and last events (etcd-backup-
			// restore's deltas as etcdkit's): one whose events end before
			// its name does would drop revisions in silence.
			if d, err := snapshot.Parse(b.name); err == nil && !r.done && r.at < d.LastRevision {
				return fmt.Errorf("delta %s: its events end at revision %d, before the %d its name says: %w", b.name, r.at, d.LastRevision, ErrDamaged)
			}
			if delta != nil {
				delta(b.name)
			}
		}
		r.release()
		if r.done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil && !r.done {
		return err
	}
	return nil
}

// flush writes the revision being gathered.
func (r *replayer) flush() error {
	if len(r.cur) == 0 {
		return nil
	}
	err := r.write(r.curName, r.curRev, r.cur)
	r.torn = r.torn || err != nil
	if err == nil && len(r.curRevoked) > 0 {
		r.revoke(r.curRevoked)
	}
	r.cur, r.curRevoked = r.cur[:0], r.curRevoked[:0]
	return err
}

// grant grants again the leases of puts that the database does not hold:
// granted after the full snapshot. A lease whose TTL no delta recorded
// gets unknownTTL, or none: its keys are then written without it. The
// TTL counts from the restored member's start, as for the leases of the
// full snapshot.
func (r *replayer) grant(id int64) bool {
	if id == 0 || r.leases[id] {
		return true
	}
	ttl, recorded := r.leaseTTL[id]
	if !recorded {
		ttl = r.unknownTTL
	}
	if ttl <= 0 {
		return false
	}
	r.b.PutLease(id, ttl)
	r.leases[id] = true
	delete(r.leaseTTL, id)
	if recorded {
		r.grantedLeases++
	} else {
		r.guessedLeases++
	}
	return true
}

// revoke removes leases their deltas recorded as revoked. One that still
// has keys keeps them and expires on the restored member: removing it
// would leave its keys alive forever.
func (r *replayer) revoke(ids []int64) {
	for _, id := range ids {
		if r.leases[id] && r.leaseKeys[id] == 0 {
			r.b.DeleteLease(id)
			delete(r.leases, id)
		}
		delete(r.leaseTTL, id)
	}
}

// attach moves key to lease id (0: none) in the lease bookkeeping.
func (r *replayer) attach(key []byte, id int64) {
	if old, ok := r.keyLease[string(key)]; ok {
		if old == id {
			return
		}
		if r.leaseKeys[old]--; r.leaseKeys[old] == 0 {
			delete(r.leaseKeys, old)
		}
		delete(r.keyLease, string(key))
	}
	if id != 0 {
		r.keyLease[string(key)] = id
		r.leaseKeys[id]++
	}
}

// write applies the events of one revision, each at its place in the
// revision's transaction, as etcd's mvcc store numbers them.
func (r *replayer) write(name string, rev int64, events []*snapshot.WatchEvent) error {
	if rev != r.at+1 && (!r.logical || rev <= r.at) {
		return fmt.Errorf("delta %s: revision %d follows revision %d: the chain does not continue the database", name, rev, r.at)
	}
	r.b.Lock()
	for sub, ev := range events {
		kv := ev.Kv
		var stored *snapshot.KeyValue
		tombstone := false
		switch ev.Type {
		case snapshot.Put:
			if kv.ModRevision != rev || kv.CreateRevision <= 0 || kv.CreateRevision > rev || kv.Version <= 0 {
				return fmt.Errorf("delta %s: revision %d: a put of %q at revision %d, created at %d, version %d, is not one etcd makes",
					name, rev, kv.Key, kv.ModRevision, kv.CreateRevision, kv.Version)
			}
			stored = kv
			if !r.grant(kv.Lease) {
				// A lease neither in the full snapshot nor granted again: its
				// key is restored without one rather than failing the restore.
				stored = &snapshot.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
					Version: kv.Version, Value: kv.Value}
				r.droppedLeases++
			}
			r.attach(kv.Key, stored.Lease)
		case snapshot.Delete:
			// etcd stores a delete as the key alone, at a revision marked as
			// a tombstone.
			stored, tombstone = &snapshot.KeyValue{Key: kv.Key}, true
			r.attach(kv.Key, 0)
		default:
			return fmt.Errorf("delta %s: revision %d: unknown event type %d", name, rev, ev.Type)
		}
		k := r.alloc(revBytesLen + 1)[:0]
		k = binary.BigEndian.AppendUint64(k, uint64(rev))
		k = append(k, '_')
		k = binary.BigEndian.AppendUint64(k, uint64(sub))
		if tombstone {
			k = append(k, 't')
		}
		v := appendKeyValue(r.alloc(keyValueSize(stored))[:0], stored)
		r.b.PutRevision(k, v)
		r.written += int64(len(k) + len(v))
	}
	r.at = rev
	r.applied++
	if r.progress != nil {
		r.progress(1)
	}
	return nil
}

// revBytesLen is the length of a revision key: main, '_', sub.
const revBytesLen = 8 + 1 + 8

// alloc returns n bytes that stay valid until the transaction commits.
func (r *replayer) alloc(n int) []byte {
	if cap(r.slab)-len(r.slab) < n {
		r.slab = make([]byte, 0, max(n, 1<<20))
	}
	b := r.slab[len(r.slab) : len(r.slab)+n : len(r.slab)+n]
	r.slab = r.slab[:len(r.slab)+n]
	return b
}
