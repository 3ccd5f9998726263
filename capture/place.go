package capture

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/store"
)

// Lineage is where a cluster writes on a store, as Place decided it.
type Lineage struct {
	// snapshot.Timeline is the timeline the cluster writes into: the store's newest.
	Timeline snapshot.Timeline
	// Continues: the timeline's newest chain is this cluster's past up to
	// its end, so deltas may go on from there; otherwise the next snapshot
	// must be a full one.
	Continues bool
	// Began: Place began snapshot.Timeline for this cluster (a fork, or a new
	// chain it was allowed to start beside another cluster's).
	Began bool
	// Reason says how it was decided.
	Reason string
	// ClusterID (hex) is the cluster's.
	ClusterID string
}

// PlaceOptions configures Place. The zero value refuses another
// cluster's chain and reads plain objects.
type PlaceOptions struct {
	// AllowNewChain: when the newest chain is another cluster's, begin a
	// timeline of this cluster's own instead of failing with
	// snapshot.ErrOtherCluster.
	AllowNewChain bool
	// DryRun decides only: a timeline that would begin is not written, and
	// the Lineage says why it would (Continues false, Began false).
	DryRun bool
	// snapshot.Codec reads the objects compared with the cluster (its Identities).
	Codec snapshot.Codec
	// Source is what the cluster is; with snapshot.SourceEtcdAPI the keys the
	// datastore keeps for itself (kine's) are not compared.
	Source snapshot.SourceKind
	// SpoolDir holds a full snapshot downloaded to be compared, for a
	// chain that has no identity record and no delta. Default os.TempDir().
	SpoolDir string
	// Logger: nil discards.
	Logger *slog.Logger
	// Now stamps a timeline Place begins. Default time.Now.
	Now func() time.Time
}

// Place decides where the cluster cli reaches may write on st, and returns
// the catalog it decided on. A cluster appends to the newest timeline's
// newest chain only on positive evidence that the chain is its past up to
// the end: a restore record that says the cluster was restored from that
// end, or its own keys, at the chain's last revision, as the chain's last
// objects left them. Another cluster's chain (by its identity record, or
// for a chain without one by its members and keys) fails with
// snapshot.ErrOtherCluster unless AllowNewChain. Anything else (a cluster restored
// to an earlier revision, with or without a record, or one whose keys
// differ from its own chain's) begins a new timeline forked from the
// newest, so the next full snapshot starts a chain there and the old
// timeline stays as it was.
func Place(ctx context.Context, cli *clientv3.Client, st store.Store, o PlaceOptions) (Lineage, snapshot.Catalog, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return Lineage{}, cat, err
	}
	for _, t := range cat.SetAside {
		logger(o.Logger).Warn("a timeline record is set aside", "record", t.Key, "reason", t.Reason)
	}
	resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return Lineage{}, cat, fmt.Errorf("current revision: %w", err)
	}
	p := placer{cli: cli, st: st, o: o, cat: cat, current: resp.Header.Revision, cluster: hexID(resp.Header.ClusterId)}
	l, err := p.place(ctx)
	if err != nil {
		return l, cat, err
	}
	l.ClusterID = p.cluster
	if l.Began {
		if cat, err = snapshot.List(ctx, st); err != nil {
			return l, cat, err
		}
	}
	logger(o.Logger).Info("backups placed", "timeline", l.Timeline.ID, "continues", l.Continues, "began", l.Began, "reason", l.Reason)
	return l, cat, nil
}

type placer struct {
	cli     *clientv3.Client
	st      store.Store
	o       PlaceOptions
	cat     snapshot.Catalog
	current int64
	cluster string
}

// place gathers the facts judgeLineage asks for, as it asks for them, and
// carries out its decision.
func (p *placer) place(ctx context.Context) (Lineage, error) {
	f := lineageFacts{cat: p.cat, current: p.current, cluster: p.cluster, allowNew: p.o.AllowNewChain, lived: map[livedKey]lived{},
		ownFulls: slices.ContainsFunc(p.cat.Own(), func(s snapshot.Snapshot) bool { return s.Kind == snapshot.KindFull })}
	switch chain, err := p.cat.Latest(); {
	case errors.Is(err, snapshot.ErrNoFull):
	case err != nil:
		return Lineage{}, err
	default:
		f.chain = &chain
	}
	for {
		o, n := judgeLineage(&f)
		if n.what == needNothing {
			return p.carry(ctx, &f, o)
		}
		if err := p.gather(ctx, &f, n); err != nil {
			return Lineage{}, err
		}
	}
}

// gather reads the fact n from the store or the cluster.
func (p *placer) gather(ctx context.Context, f *lineageFacts, n need) error {
	var err error
	switch n.what {
	case needRestore:
		var rr snapshot.Restored
		var ok bool
		if rr, ok, err = snapshot.LastRestore(ctx, p.st, p.cluster); ok {
			f.restore = &rr
		}
		f.restoreKnown = true
	case needIdentity:
		var id snapshot.Identity
		var ok bool
		if id, ok, err = snapshot.ReadIdentity(ctx, p.st, f.chain.Full); ok {
			f.identity = &id
		}
		f.identityKnown = true
	case needLinked:
		f.linked, err = snapshot.Continues(ctx, p.st, p.cluster, f.identity.ClusterID)
		f.linkedKnown = true
	case needMembers:
		if f.fullTail, f.fullMembers, err = snapshot.FullTail(ctx, p.st, f.chain.Full, p.o.Codec, p.o.SpoolDir); err != nil {
			return err
		}
		var live snapshot.Identity
		live, err = IdentityOf(ctx, p.cli)
		f.liveMems, f.membersKnown = live.MemberIDs, true
	case needPast:
		end := f.chain.LastRevision()
		if end <= 1 {
			// Every cluster's past at revision 1 is the same empty keyspace.
			f.past.shared, f.past.proven = end, end
		} else {
			tail := f.fullTail
			if f.identity != nil {
				tail = f.identity.Tail
			}
			f.past, err = p.sharedPast(ctx, *f.chain, tail, min(end, p.current))
		}
		f.pastKnown = true
	case needLived:
		var l lived
		l, err = p.lived(ctx, n.from, n.fork)
		f.lived[livedKey{n.from, n.fork}] = l
	}
	return err
}

// lived reads timeline from's newest chain, and when it reaches past
// fork, the newest revision at which the cluster's keys are what it left.
func (p *placer) lived(ctx context.Context, from string, fork int64) (lived, error) {
	cat, err := p.cat.On(from)
	if err != nil {
		return lived{}, err
	}
	chain, err := cat.Latest()
	switch {
	case errors.Is(err, snapshot.ErrNoFull):
		return lived{noChain: true}, nil
	case err != nil:
		return lived{}, err
	}
	l := lived{last: chain.LastRevision(), full: chain.Full.Key, timeline: cat.Timeline}
	if l.last <= fork {
		return l, nil
	}
	id, _, err := snapshot.ReadIdentity(ctx, p.st, chain.Full)
	if err != nil {
		return l, err
	}
	l.past, err = p.sharedPast(ctx, chain, id.Tail, min(l.last, p.current))
	return l, err
}

// carry carries out the table's decision.
func (p *placer) carry(ctx context.Context, f *lineageFacts, o outcome) (Lineage, error) {
	if rr := o.setAside; rr != nil {
		logger(p.o.Logger).Warn("a restore record of this cluster's ID is set aside: the cluster's own keys contradict it (a restore nothing runs from, or another deployment of the same configuration)",
			"record_snapshot", rr.Snapshot, "record_revision", rr.Revision, "chain_end", f.chain.LastRevision(), "shared_revision", f.past.shared, "differs", f.past.why)
	}
	switch {
	case o.previous:
		return p.pastUnreadable(ctx)
	case o.refuse != "":
		return Lineage{}, fmt.Errorf("%w: %s: point the store at another prefix, or start a new chain here on purpose (--allow-new-chain)", snapshot.ErrOtherCluster, o.refuse)
	case o.begin != nil:
		return p.begin(ctx, *o.begin)
	}
	if o.adopt {
		p.adopt(ctx, f.chain.Full, f.fullTail)
	}
	return Lineage{Timeline: p.cat.Timeline, Continues: o.continues, Reason: o.reason}, nil
}

// pastUnreadable places a cluster whose store's newest timeline has a
// record that cannot be read and no full snapshot. It is nobody's live
// timeline (records are written whole, create-only: a writer leaves none
// half-written), and it tells neither who began it nor where from; so the
// cluster is placed on the timeline before it, and begins its own after
// both, since only the newest timeline is written to.
func (p *placer) pastUnreadable(ctx context.Context) (Lineage, error) {
	tls := p.cat.Timelines
	t, prev := tls[len(tls)-1], tls[len(tls)-2]
	logger(p.o.Logger).Warn("the newest timeline's record cannot be read and it holds no full snapshot: set aside; the cluster is placed on the one before it",
		"timeline", t.ID, "record", t.Key, "reason", t.Reason, "placed_on", prev.ID)
	before := *p
	cat, err := p.cat.On(prev.ID)
	if err != nil {
		return Lineage{}, err
	}
	before.cat = cat
	l, err := before.place(ctx)
	if err != nil || l.Began {
		return l, err
	}
	fork := snapshot.Timeline{Parent: prev.ID, Reason: fmt.Sprintf("%s holds no full snapshot and %s; on %s: %s", t, t.Reason, prev, l.Reason)}
	if chain, err := cat.Latest(); err == nil && l.Continues {
		fork.ForkRevision, fork.ForkSnapshot = chain.LastRevision(), chain.Full.Key
	}
	return p.begin(ctx, fork)
}

// sharedProbes bounds how many of a chain's deltas sharedPast compares.
const sharedProbes = 6

// sharedPast is the newest revision, at most below, at which the
// cluster's keys are those the chain left: the chain's deltas ending at or
// below it, newest first (a few), then its full (fullTail, when its
// identity recorded one; else it is read). shared is 0 when none agrees;
// differs when one was seen to differ, and why; proven how far the keys
// that agreed prove it (compareLive).
func (p *placer) sharedPast(ctx context.Context, chain snapshot.Chain, fullTail []snapshot.KeyVersion, below int64) (pastResult, error) {
	probes := 0
	var unknown string
	var r pastResult
	// Newest end first: a chain lists the longer of two deltas that start
	// together first (two uploaders overlap after a leader moves), so its
	// order is not that of their ends.
	deltas := slices.Clone(chain.Deltas)
	slices.SortStableFunc(deltas, func(a, b snapshot.Snapshot) int { return cmp.Compare(b.LastRevision, a.LastRevision) })
	for i := 0; i < len(deltas) && probes < sharedProbes; i++ {
		d := deltas[i]
		if d.StartRevision > below {
			continue
		}
		// A delta past below is read up to it: a restore to the middle
		// of one is compared there.
		at := min(d.LastRevision, below)
		probes++
		tail, window, err := snapshot.DeltaTail(ctx, p.st, d, p.o.Codec, at, windowRevisions)
		if err != nil {
			return pastResult{}, err
		}
		e, w, proven, err := compareLive(ctx, p.cli, p.own().tail(tail), at)
		if err == nil && e == evidenceSame {
			// The keys the chain wrote agree; the cluster may have written
			// others in the same revisions. Events that cannot be read
			// (compacted, slow) leave the keys' word standing.
			var ev evidence
			if ev, w, err = compareEvents(ctx, p.cli, window, max(d.StartRevision-1, at-windowRevisions), at, p.own()); ev == evidenceDiffers {
				e = ev
			}
		}
		switch {
		case err != nil:
			return pastResult{}, err
		case e == evidenceSame:
			r.shared, r.proven, r.why = at, proven, cmp.Or(r.why, unknown)
			return r, nil
		case e == evidenceDiffers:
			r.differs, r.why = true, cmp.Or(r.why, w)
		default:
			unknown = cmp.Or(unknown, fmt.Sprintf("at revision %d: %s", at, w))
		}
	}
	if chain.Full.LastRevision > below {
		r.why = cmp.Or(r.why, fmt.Sprintf("the cluster is at revision %d, below the chain's first", p.current))
		return r, nil
	}
	if len(fullTail) == 0 {
		var err error
		if fullTail, _, err = snapshot.FullTail(ctx, p.st, chain.Full, p.o.Codec, p.o.SpoolDir); err != nil {
			return pastResult{}, err
		}
	}
	e, w, proven, err := compareLive(ctx, p.cli, p.own().tail(fullTail), chain.Full.LastRevision)
	switch {
	case err != nil:
		return pastResult{}, err
	case e == evidenceSame:
		r.shared, r.proven, r.why = chain.Full.LastRevision, proven, cmp.Or(r.why, unknown)
		return r, nil
	case e == evidenceDiffers:
		r.differs, r.why = true, cmp.Or(r.why, w)
	}
	r.why = cmp.Or(r.why, w)
	return r, nil
}

// own says which keys the comparisons leave to the datastore.
func (p placer) own() ownKeys { return ownKeys(p.o.Source == snapshot.SourceEtcdAPI) }

// tail leaves out of a tail the datastore's own keys, and the empty key
// of a revision bump.
func (o ownKeys) tail(t []snapshot.KeyVersion) []snapshot.KeyVersion {
	// An empty key is no key: a restore's revision bump is recorded as
	// one at the raised revision (etcdutl's), which no client can ask.
	return slices.DeleteFunc(slices.Clone(t), func(k snapshot.KeyVersion) bool { return len(k.Key) == 0 || o.key(k.Key, k.Deleted) })
}

// begin writes the record of a timeline of this cluster's own.
func (p placer) begin(ctx context.Context, t snapshot.Timeline) (Lineage, error) {
	t.ClusterID = p.cluster
	if p.o.DryRun {
		return Lineage{Timeline: p.cat.Timeline, Reason: "a new timeline would begin: " + t.Reason}, nil
	}
	// The timeline begun must be the newest: one begun in the same second
	// as another (names keep whole seconds), or a few behind it on a
	// clock that lags another host's, would be ordered before it. It
	// begins after it, waiting for that second, since an object belongs
	// to the newest timeline begun when it was created. A newest timeline
	// further ahead is left as it is: no wait may stop the backups.
	now := p.o.Now()
	if tls := p.cat.Timelines; len(tls) > 0 && now.Unix() <= tls[len(tls)-1].Began.Unix() {
		began := tls[len(tls)-1].Began.Add(time.Second)
		if wait := began.Sub(now); wait <= maxTimelineWait {
			select {
			case <-ctx.Done():
				return Lineage{}, ctx.Err()
			case <-time.After(wait):
			}
			now = began
		}
	}
	t, err := snapshot.BeginTimeline(ctx, p.st, t, now, p.cat.All())
	if err != nil {
		return Lineage{}, err
	}
	logger(p.o.Logger).Warn("a new timeline begins: the next full snapshot starts its first chain, and the old timeline stays as it was",
		"timeline", t.ID, "parent", t.Parent, "fork_revision", t.ForkRevision, "reason", t.Reason)
	if newest := p.cat.NewestRevision(); p.current <= newest {
		// A reader that knows no timelines takes the full snapshot with
		// the highest revision and every delta named past it: until this
		// cluster passes the older timelines, it mixes them with this one.
		logger(p.o.Logger).Warn("the cluster's revision is behind the store's backups: etcd-backup-restore restores this store wrong until the cluster passes them "+
			"(etcd-backup restore bumps the revision past them; a restore by etcdutl or with --revision-bump 0 does not): restore again with a bump, or back up to another prefix",
			"revision", p.current, "store_newest", newest)
	}
	return Lineage{Timeline: t, Began: true, Reason: t.Reason}, nil
}

// maxTimelineWait bounds how long begin waits to begin a timeline after
// the newest.
const maxTimelineWait = 5 * time.Second

// adopt records the identity a chain without one was found to have.
func (p placer) adopt(ctx context.Context, full snapshot.Snapshot, tail []snapshot.KeyVersion) {
	id, err := IdentityOf(ctx, p.cli)
	if err == nil {
		id.Tail, id.Adopted = tail, true
		err = snapshot.WriteIdentity(ctx, p.st, full, id)
	}
	if err != nil && !errors.Is(err, snapshot.ErrConflict) {
		logger(p.o.Logger).Warn("the chain's identity was not recorded; it is compared again at the next start", "full", full.Key, "error", err)
	}
}
