package restore

import (
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcdkit/etcdkit/snapshot"
)

// replayer applies delta events to an etcd database file through etcd's
// own mvcc store: one write transaction per original revision, so every
// revision, create revision and version comes out as etcd made it. No raft,
// no gRPC, no fsync per revision.
type replayer struct {
	path   string
	b      backend.Backend
	lessor lease.Lessor
	kv     mvcc.KV
	// at is the revision the database is at.
	at int64
	// until and untilTime end the replay (point-in-time restore).
	until     int64
	untilTime time.Time
	done      bool
	// cur gathers the events of revision curRev from delta curName, and
	// curRevoked the leases its deltas recorded as revoked by then.
	cur        []*mvccpb.Event
	curRev     int64
	curName    string
	curRevoked []int64
	// leaseTTL holds the TTLs the deltas recorded of leases not granted
	// yet; unknownTTL (seconds) is granted to the others, none when 0.
	leaseTTL   map[int64]int64
	unknownTTL int64
	// auth is the newest users and roles the replayed deltas recorded.
	auth *snapshot.Auth
	// applied counts revisions written; granted counts leases granted
	// with their recorded TTL, guessed those granted unknownTTL, dropped
	// the puts written without their lease.
	applied, grantedLeases, guessedLeases, droppedLeases int64
	progress                                             func(revisions int64)
}

func openReplayer(path string, until int64, untilTime time.Time, unknownTTL time.Duration) *replayer {
	lg := zap.NewNop()
	cfg := backend.DefaultBackendConfig(lg)
	cfg.Path = path
	// The file is copied into the data dir and synced there; syncing
	// every batch here would only slow the replay.
	cfg.UnsafeNoFsync = true
	cfg.BatchLimit = 100000
	b := backend.New(cfg)
	// A lessor that is never promoted: it knows the full's leases and
	// never expires one.
	lessor := lease.NewLessor(lg, b, nil, lease.LessorConfig{MinLeaseTTL: 1})
	// No one reads while Compact runs, so it need not pause between
	// batches as a serving member does.
	kv := mvcc.NewStore(lg, b, lessor, mvcc.StoreConfig{CompactionBatchLimit: 100000, CompactionSleepInterval: time.Microsecond})
	return &replayer{path: path, b: b, lessor: lessor, kv: kv, at: kv.Rev(), until: until, untilTime: untilTime,
		leaseTTL: map[int64]int64{}, unknownTTL: int64(max(unknownTTL, 0) / time.Second)}
}

// close commits and closes everything; the file is then a plain etcd
// database again.
func (r *replayer) close() error {
	err := r.kv.Close()
	r.lessor.Stop()
	r.b.ForceCommit()
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
	if ev.LeaseTTL > 0 {
		r.leaseTTL[ev.EtcdEvent.Kv.Lease] = ev.LeaseTTL
	}
	r.curName, r.curRev = name, rev
	r.cur = append(r.cur, ev.EtcdEvent)
	r.curRevoked = append(r.curRevoked, ev.RevokedLeases...)
	r.noteAuth(ev)
	return nil
}

// flush writes the revision being gathered.
func (r *replayer) flush() error {
	if len(r.cur) == 0 {
		return nil
	}
	err := r.write(r.curName, r.curRev, r.cur)
	if err == nil {
		r.revoke(r.curRevoked)
	}
	r.cur, r.curRevoked = r.cur[:0], r.curRevoked[:0]
	return err
}

// grant grants again the leases of puts that the database does not hold:
// granted after the full snapshot. It runs before the revision's
// transaction, which holds the lock a grant takes.
func (r *replayer) grant(events []*mvccpb.Event) {
	for _, ev := range events {
		id := lease.LeaseID(ev.Kv.Lease)
		if ev.Type != mvccpb.PUT || id == lease.NoLease || r.lessor.Lookup(id) != nil {
			continue
		}
		ttl, recorded := r.leaseTTL[ev.Kv.Lease]
		if !recorded {
			ttl = r.unknownTTL
		}
		if ttl <= 0 {
			continue
		}
		// A lessor that is not primary holds a granted lease forever: the
		// TTL counts from the restored member's start, as for the leases
		// of the full snapshot.
		if _, err := r.lessor.Grant(id, min(ttl, lease.MaxLeaseTTL)); err != nil {
			continue
		}
		delete(r.leaseTTL, ev.Kv.Lease)
		if recorded {
			r.grantedLeases++
		} else {
			r.guessedLeases++
		}
	}
}

// revoke removes leases their deltas recorded as revoked. One that still
// has keys keeps them and expires on the restored member: removing it
// would leave its keys alive forever.
func (r *replayer) revoke(ids []int64) {
	for _, id := range ids {
		if l := r.lessor.Lookup(lease.LeaseID(id)); l != nil && len(l.Keys()) == 0 {
			_ = r.lessor.Revoke(l.ID)
		}
		delete(r.leaseTTL, id)
	}
}

// write applies the events of one revision in one mvcc transaction and
// checks the store landed on that revision.
func (r *replayer) write(name string, rev int64, events []*mvccpb.Event) error {
	r.grant(events)
	tw := r.kv.Write(untraced())
	if at := tw.Rev(); at+1 != rev {
		tw.End()
		return fmt.Errorf("delta %s: revision %d follows revision %d: the chain does not continue the database", name, rev, at)
	}
	for _, ev := range events {
		kv := ev.Kv
		switch ev.Type {
		case mvccpb.PUT:
			id := lease.LeaseID(kv.Lease)
			// A lease neither in the full snapshot nor granted again: its
			// key is restored without one rather than failing the restore.
			if id != lease.NoLease && r.lessor.Lookup(id) == nil {
				id = lease.NoLease
				r.droppedLeases++
			}
			tw.Put(kv.Key, kv.Value, id)
		case mvccpb.DELETE:
			tw.DeleteRange(kv.Key, nil)
		default:
			tw.End()
			return fmt.Errorf("delta %s: revision %d: unknown event type %d", name, rev, ev.Type)
		}
	}
	changed := len(tw.Changes()) > 0
	tw.End()
	if !changed {
		return fmt.Errorf("delta %s: revision %d changed nothing (a delete of a key the database does not hold): the chain does not continue the database", name, rev)
	}
	r.at = rev
	r.applied++
	if r.progress != nil {
		r.progress(1)
	}
	return nil
}

// untraced is the trace etcd's mvcc store takes with every transaction. A
// restore records none, and the trace must be a fresh one each time:
// mvcc appends a step to it for each operation, so a shared one would grow
// with the chain. traceutil.TODO is etcd's own constructor of such an
// empty trace; there is no other in 3.7.
func untraced() *traceutil.Trace { return traceutil.TODO() }
