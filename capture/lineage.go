package capture

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
	past    *pastResult
}

func (p *placer) place(ctx context.Context) (Lineage, error) {
	t := p.cat.Timeline
	here := Lineage{Timeline: t}
	ownFulls := slices.ContainsFunc(p.cat.Own(), func(s snapshot.Snapshot) bool { return s.Kind == snapshot.KindFull })
	if t.Unreadable && !ownFulls {
		return p.pastUnreadable(ctx)
	}
	if t.Key != "" && t.ClusterID != p.cluster && !ownFulls {
		return p.foreign(ctx, fmt.Sprintf("cluster %s began %s and has written no full snapshot there yet", t.ClusterID, t))
	}
	if t.Key != "" && t.ClusterID == p.cluster && !ownFulls {
		if l, ok, err := p.livedOn(ctx, t.Parent, t.ForkRevision, fmt.Sprintf("%s names this cluster, restored to revision %d", t, t.ForkRevision)); err != nil || ok {
			return l, err
		}
	}
	chain, err := p.cat.Latest()
	if errors.Is(err, snapshot.ErrNoFull) {
		here.Reason = "the store holds no full snapshot to continue"
		return here, nil
	}
	if err != nil {
		return Lineage{}, err
	}
	end := chain.LastRevision()
	rr, restored, err := snapshot.LastRestore(ctx, p.st, p.cluster)
	if err != nil {
		return Lineage{}, err
	}
	if restored && !rr.Created.Before(chain.Full.Created) {
		if t.Key != "" && t.ClusterID == p.cluster && !t.Began.Before(rr.Created) {
			here.Reason = fmt.Sprintf("the cluster began %s after its restore; its first full snapshot is due", t)
			return here, nil
		}
		l, ok, err := p.byRecord(ctx, chain, rr)
		if err != nil || ok {
			return l, err
		}
	}
	if t.Key != "" && t.ClusterID == p.cluster && !ownFulls {
		here.Reason = fmt.Sprintf("the cluster began %s; its first full snapshot is due", t)
		return here, nil
	}
	id, hasID, err := snapshot.ReadIdentity(ctx, p.st, chain.Full)
	if err != nil {
		return Lineage{}, err
	}
	if hasID && id.ClusterID != p.cluster {
		linked, err := snapshot.Continues(ctx, p.st, p.cluster, id.ClusterID)
		if err != nil {
			return Lineage{}, err
		}
		if !linked {
			return p.foreign(ctx, fmt.Sprintf("%s was taken of cluster %s, this is cluster %s", chain.Full.Key, id.ClusterID, p.cluster))
		}
	}
	if !hasID {
		// The full's own database names the members it was taken of.
		tail, members, err := snapshot.FullTail(ctx, p.st, chain.Full, p.o.Codec, p.o.SpoolDir)
		if err != nil {
			return Lineage{}, err
		}
		id.Tail = tail
		live, err := IdentityOf(ctx, p.cli)
		if err != nil {
			return Lineage{}, err
		}
		if !slices.ContainsFunc(members, func(m string) bool { return slices.Contains(live.MemberIDs, m) }) {
			return p.foreign(ctx, fmt.Sprintf("%s has no identity record and its database names members %s, none of this cluster's (%s)",
				chain.Full.Key, strings.Join(members, ","), strings.Join(live.MemberIDs, ",")))
		}
	}
	if end <= 1 {
		// Every cluster's past at revision 1 is the same empty keyspace.
		here.Continues, here.Reason = true, fmt.Sprintf("%s ends at revision %d, before any key was written", t, end)
		return here, nil
	}
	shared, differs, why, err := p.pastOf(ctx, chain, id.Tail)
	if err != nil {
		return Lineage{}, err
	}
	if shared != end && shared <= t.ForkRevision {
		// The cluster shares no more than the past the newest timeline
		// inherited: it may be the one that went on in the parent, not
		// one restored to the fork (the cluster of the old timeline
		// started again beside a clone restored from it).
		if l, ok, err := p.livedOn(ctx, t.Parent, t.ForkRevision, fmt.Sprintf("%s forked at revision %d", t, t.ForkRevision)); err != nil || ok {
			return l, err
		}
	}
	switch {
	case shared == end:
		if !hasID {
			p.adopt(ctx, chain.Full, id.Tail)
		}
		here.Continues, here.Reason = true, fmt.Sprintf("the cluster's keys at revision %d are those %s left", end, t)
		return here, nil
	case shared > 0 && p.current < end:
		return p.begin(ctx, snapshot.Timeline{Parent: t.ID, ForkRevision: shared, ForkSnapshot: chain.Full.Key,
			Reason: fmt.Sprintf("the cluster is at revision %d, below the end of %s (%d), and its keys at revision %d are the chain's: it was restored to an earlier revision without a record of it", p.current, t, end, shared)})
	case shared > 0 && differs:
		return p.begin(ctx, snapshot.Timeline{Parent: t.ID, ForkRevision: shared, ForkSnapshot: chain.Full.Key,
			Reason: fmt.Sprintf("the cluster's keys at revision %d differ from those %s left (%s), and at revision %d they are the chain's: it was restored to an earlier revision without a record of it", end, t, why, shared)})
	case shared > 0:
		// Unknown is no answer: the chain's past is certain only to shared.
		return p.begin(ctx, snapshot.Timeline{Parent: t.ID, ForkRevision: shared, ForkSnapshot: chain.Full.Key,
			Reason: fmt.Sprintf("the cluster's keys at revision %d are the chain's, and whether its revisions since, to the end of %s (%d), are cannot be told (%s)", shared, t, end, cmpOr(why, "no key compared tells"))})
	case differs:
		// The same cluster ID and no revision where the keys agree: another
		// deployment of the same configuration (etcd derives the IDs from
		// the names, peer URLs and token alone), not this cluster's past.
		return p.foreign(ctx, fmt.Sprintf("this cluster's keys agree with %s at none of the revisions compared (%s)", chain.Full.Key, why))
	}
	if p.current < end {
		// Behind the chain and no key to compare: a restore of this
		// cluster or a twin of its configuration; unknown is no answer.
		return p.foreign(ctx, fmt.Sprintf("this cluster (at revision %d, below the chain's end %d) has the chain's cluster ID, and whether its past is the chain's cannot be told (%s)", p.current, end, why))
	}
	// Past the chain's end and nothing tells (its end is compacted and
	// every key compared was written since): begin a timeline that shares
	// no past, so that no chain mixes two.
	return p.begin(ctx, snapshot.Timeline{Parent: t.ID, ForkSnapshot: chain.Full.Key,
		Reason: fmt.Sprintf("whether the cluster's past is that of %s cannot be told (%s)", t, why)})
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

// livedOn is for a cluster said to have been restored to revision fork
// of timeline from (by the newest timeline, which forked there and names
// it, or by a record of a restore of its ID), which the newest timeline
// is no past of: when the cluster's own keys are from's past that
// revision, the cluster lived on in from and was never restored (a
// record added by hand, which a locked bucket keeps, or the old
// timeline's cluster started again beside a clone restored from it). It
// begins a timeline of its own from there at the revision the keys
// share, instead of going on in a past it never had (ok). what says what
// said otherwise.
func (p *placer) livedOn(ctx context.Context, from string, fork int64, what string) (Lineage, bool, error) {
	if from == "" || fork <= 0 || p.current <= fork {
		return Lineage{}, false, nil
	}
	// A timeline the store does not hold, or one without a chain past
	// the fork, tells nothing against what said so.
	if _, ok := p.cat.FindTimeline(from); !ok {
		return Lineage{}, false, nil
	}
	cat, err := p.cat.On(from)
	if err != nil {
		return Lineage{}, false, err
	}
	chain, err := cat.Latest()
	switch {
	case errors.Is(err, snapshot.ErrNoFull):
		return Lineage{}, false, nil
	case err != nil:
		return Lineage{}, false, err
	case chain.LastRevision() <= fork:
		return Lineage{}, false, nil
	}
	id, _, err := snapshot.ReadIdentity(ctx, p.st, chain.Full)
	if err != nil {
		return Lineage{}, false, err
	}
	shared, _, _, err := p.sharedPast(ctx, chain, id.Tail, min(chain.LastRevision(), p.current))
	if err != nil || shared <= fork {
		return Lineage{}, false, err
	}
	l, err := p.begin(ctx, snapshot.Timeline{Parent: from, ForkRevision: shared, ForkSnapshot: chain.Full.Key,
		Reason: fmt.Sprintf("%s, but the cluster's keys at revision %d are those %s left: it went on in %s, not from revision %d", what, shared, cat.Timeline, from, fork)})
	return l, true, err
}

// byRecord decides by the newest record of a restore of this cluster
// (ok), or sets it aside. A record names a cluster by its ID alone, which
// every deployment of the same configuration shares, and a restore writes
// one whether or not a cluster ever runs from what it built (a restore into
// a scratch directory): it is believed only where the cluster's own keys do
// not contradict it. A record of a restore to the end of this chain
// continues it unless the cluster's keys at the end differ from the
// chain's; a record of an earlier revision, or of another chain, forks a
// timeline there unless the cluster's keys show it lived this chain to its
// end (it is not what that restore built, or it went on from it).
func (p *placer) byRecord(ctx context.Context, chain snapshot.Chain, rr snapshot.Restored) (Lineage, bool, error) {
	t, end := p.cat.Timeline, chain.LastRevision()
	id, _, err := snapshot.ReadIdentity(ctx, p.st, chain.Full)
	if err != nil {
		return Lineage{}, false, err
	}
	shared, differs, why, err := p.pastOf(ctx, chain, id.Tail)
	if err != nil {
		return Lineage{}, false, err
	}
	here := Lineage{Timeline: t}
	sameChain := rr.Timeline == t.ID && rr.Snapshot == chain.Full.Key
	switch {
	case sameChain && shared == end && rr.Revision == end:
		here.Continues, here.Reason = true, fmt.Sprintf("a restore of this cluster's ID from %s to revision %d, the end of %s, is recorded, and the cluster's keys there are those it left", rr.Snapshot, rr.Revision, t)
		return here, true, nil
	case sameChain && shared == end:
		here.Continues, here.Reason = true, fmt.Sprintf("the cluster's keys at revision %d are those %s left: the restore of its ID to revision %d recorded since is not what it runs from", end, t, rr.Revision)
		return here, true, nil
	case sameChain && rr.Revision == end && !differs:
		here.Continues, here.Reason = true, fmt.Sprintf("a restore of this cluster's ID from %s to revision %d, the end of %s, is recorded, and none of the cluster's keys says otherwise (%s)", rr.Snapshot, rr.Revision, t, cmpOr(why, "no key compared tells"))
		return here, true, nil
	case shared == end, rr.Revision == end && sameChain:
		logger(p.o.Logger).Warn("a restore record of this cluster's ID is set aside: the cluster's own keys contradict it (a restore nothing runs from, or another deployment of the same configuration)",
			"record_snapshot", rr.Snapshot, "record_revision", rr.Revision, "chain_end", end, "shared_revision", shared, "differs", why)
		return Lineage{}, false, nil
	}
	fork := rr.Revision
	if _, ok := p.cat.FindTimeline(rr.Timeline); !ok {
		fork = 0
	}
	if l, ok, err := p.livedOn(ctx, rr.Timeline, fork, fmt.Sprintf("a restore of this cluster's ID from %s to revision %d is recorded", rr.Snapshot, rr.Revision)); err != nil || ok {
		return l, ok, err
	}
	l, err := p.begin(ctx, snapshot.Timeline{Parent: cmpOr(rr.Timeline, t.ID), ForkRevision: fork, ForkSnapshot: rr.Snapshot,
		Reason: fmt.Sprintf("restored from %s at revision %d, while %s went on to revision %d", rr.Snapshot, rr.Revision, t, end)})
	return l, true, err
}

// pastOf is sharedPast to the cluster's revision or the chain's end,
// asked once per placing: the record and the keys may both ask it.
func (p *placer) pastOf(ctx context.Context, chain snapshot.Chain, fullTail []snapshot.KeyVersion) (shared int64, differs bool, why string, err error) {
	if p.past == nil {
		end := chain.LastRevision()
		r := pastResult{}
		if end <= 1 {
			// Every cluster's past at revision 1 is the same empty keyspace.
			r.shared = end
		} else {
			r.shared, r.differs, r.why, r.err = p.sharedPast(ctx, chain, fullTail, min(end, p.current))
		}
		p.past = &r
	}
	return p.past.shared, p.past.differs, p.past.why, p.past.err
}

type pastResult struct {
	shared  int64
	differs bool
	why     string
	err     error
}

// sharedProbes bounds how many of a chain's deltas sharedPast compares.
const sharedProbes = 6

// sharedPast is the newest revision, at most below, at which the
// cluster's keys are those the chain left: the chain's deltas ending at or
// below it, newest first (a few), then its full (fullTail, when its
// identity recorded one; else it is read). 0 when none agrees; differs
// when one was seen to differ, and why.
func (p placer) sharedPast(ctx context.Context, chain snapshot.Chain, fullTail []snapshot.KeyVersion, below int64) (shared int64, differs bool, why string, err error) {
	probes := 0
	var unknown string
	for i := len(chain.Deltas) - 1; i >= 0 && probes < sharedProbes; i-- {
		d := chain.Deltas[i]
		if d.StartRevision > below {
			continue
		}
		// A delta past below is read up to it: a restore to the middle
		// of one is compared there.
		at := min(d.LastRevision, below)
		probes++
		tail, window, err := snapshot.DeltaTail(ctx, p.st, d, p.o.Codec, at, windowRevisions)
		if err != nil {
			return 0, false, "", err
		}
		e, w, err := compareLive(ctx, p.cli, p.own().tail(tail), at)
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
			return 0, false, "", err
		case e == evidenceSame:
			return at, differs, cmpOr(why, unknown), nil
		case e == evidenceDiffers:
			differs, why = true, cmpOr(why, w)
		default:
			unknown = cmpOr(unknown, fmt.Sprintf("at revision %d: %s", at, w))
		}
	}
	if chain.Full.LastRevision > below {
		return 0, differs, cmpOr(why, fmt.Sprintf("the cluster is at revision %d, below the chain's first", p.current)), nil
	}
	if len(fullTail) == 0 {
		if fullTail, _, err = snapshot.FullTail(ctx, p.st, chain.Full, p.o.Codec, p.o.SpoolDir); err != nil {
			return 0, false, "", err
		}
	}
	e, w, err := compareLive(ctx, p.cli, p.own().tail(fullTail), chain.Full.LastRevision)
	switch {
	case err != nil:
		return 0, false, "", err
	case e == evidenceSame:
		return chain.Full.LastRevision, differs, cmpOr(why, unknown), nil
	case e == evidenceDiffers:
		differs, why = true, cmpOr(why, w)
	}
	return 0, differs, cmpOr(why, w), nil
}

// own says which keys the comparisons leave to the datastore.
func (p placer) own() ownKeys { return ownKeys(p.o.Source == snapshot.SourceEtcdAPI) }

// tail leaves out of a tail the datastore's own keys.
func (o ownKeys) tail(t []snapshot.KeyVersion) []snapshot.KeyVersion {
	return slices.DeleteFunc(slices.Clone(t), func(k snapshot.KeyVersion) bool { return o.key(k.Key, k.Deleted) })
}

// foreign refuses another cluster's chain, or begins a timeline beside it
// when allowed.
func (p placer) foreign(ctx context.Context, why string) (Lineage, error) {
	if !p.o.AllowNewChain {
		return Lineage{}, fmt.Errorf("%w: %s: point the store at another prefix, or start a new chain here on purpose (--allow-new-chain)", snapshot.ErrOtherCluster, why)
	}
	return p.begin(ctx, snapshot.Timeline{Parent: p.cat.Timeline.ID, Reason: "a new chain beside another cluster's, as allowed: " + why})
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

type evidence int

const (
	evidenceNone evidence = iota
	evidenceSame
	evidenceDiffers
)

// compareLive asks the cluster for each key of tail as revision rev left
// it. One key that differs is a different past; one that agrees, with
// none that differs, the same past. When rev is compacted, keys are read
// as they are now, which tells only for keys not written since.
func compareLive(ctx context.Context, cli *clientv3.Client, tail []snapshot.KeyVersion, rev int64) (evidence, string, error) {
	atRev := true
	agree := 0
	for _, want := range tail {
		var opts []clientv3.OpOption
		if atRev {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, string(want.Key), opts...)
		if atRev && errors.Is(err, rpctypes.ErrCompacted) {
			atRev = false
			if resp, err = cli.Get(ctx, string(want.Key)); err != nil {
				return evidenceNone, "", fmt.Errorf("compare with the cluster: %w", err)
			}
		}
		if err != nil {
			return evidenceNone, "", fmt.Errorf("compare with the cluster: %w", err)
		}
		var got *mvccpb.KeyValue
		if len(resp.Kvs) > 0 {
			got = resp.Kvs[0]
		}
		e, why := judge(want, got, rev, atRev)
		if e == evidenceNone && atRev && want.Deleted && got == nil {
			if e, why, err = deletedAt(ctx, cli, want); err != nil {
				return evidenceNone, "", fmt.Errorf("compare with the cluster: %w", err)
			}
		}
		switch e {
		case evidenceDiffers:
			return evidenceDiffers, why, nil
		case evidenceSame:
			agree++
		}
	}
	switch {
	case agree > 0:
		return evidenceSame, "", nil
	case len(tail) == 0:
		return evidenceNone, "the chain's end holds no key to compare", nil
	}
	if atRev {
		return evidenceNone, fmt.Sprintf("the keys at revision %d were all deleted, at revisions compacted on the cluster", rev), nil
	}
	return evidenceNone, fmt.Sprintf("revision %d is compacted on the cluster and every key compared was written since", rev), nil
}

// deletedAt tells whether the cluster's revision want.Mod deleted the key,
// as the chain's did: a chain whose newest delta holds only deletes (a
// Kubernetes cluster's expired events) would otherwise show nothing of
// its end. The key exists just before that revision and not at it, or the
// pasts differ (etcd reports a delete only of a key that exists);
// compacted, there is no word.
func deletedAt(ctx context.Context, cli *clientv3.Client, want snapshot.KeyVersion) (evidence, string, error) {
	if want.Mod <= 1 {
		return evidenceNone, "", nil
	}
	exists := func(rev int64) (bool, error) {
		resp, err := cli.Get(ctx, string(want.Key), clientv3.WithRev(rev), clientv3.WithCountOnly())
		if err != nil {
			return false, err
		}
		return resp.Count > 0, nil
	}
	before, err := exists(want.Mod - 1)
	if err == nil && before {
		var at bool
		if at, err = exists(want.Mod); err == nil && !at {
			return evidenceSame, "", nil
		}
	}
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return evidenceNone, "", nil
	case err != nil:
		return evidenceNone, "", err
	case !before:
		return evidenceDiffers, fmt.Sprintf("key %q was deleted at revision %d, the cluster had none at %d", want.Key, want.Mod, want.Mod-1), nil
	}
	return evidenceDiffers, fmt.Sprintf("key %q was deleted at revision %d, the cluster's was deleted later", want.Key, want.Mod), nil
}

// judge compares one key: got is the cluster's, at rev when atRev, else
// as it is now.
func judge(want snapshot.KeyVersion, got *mvccpb.KeyValue, rev int64, atRev bool) (evidence, string) {
	key := fmt.Sprintf("%q", want.Key)
	equal := func() bool {
		// A datastore that keeps no versions (kine) answers 0; its
		// backups record 1.
		return got.ModRevision == want.Mod && got.CreateRevision == want.Create && max(got.Version, 1) == want.Version &&
			crc32.Checksum(got.Value, castagnoli) == want.Value
	}
	switch {
	case atRev && want.Deleted && got == nil:
		// Every past in which the key does not exist agrees: no word.
		return evidenceNone, ""
	case atRev && !want.Deleted && got != nil && equal():
		return evidenceSame, ""
	case atRev && want.Deleted:
		return evidenceDiffers, fmt.Sprintf("key %s was deleted at revision %d, the cluster has it from revision %d", key, want.Mod, got.ModRevision)
	case atRev && got == nil:
		return evidenceDiffers, fmt.Sprintf("key %s was written at revision %d, the cluster has none at %d", key, want.Mod, rev)
	case atRev:
		return evidenceDiffers, fmt.Sprintf("key %s was written at revision %d, the cluster's is of revision %d with other contents", key, want.Mod, got.ModRevision)
	case got == nil:
		return evidenceNone, ""
	case want.Deleted && got.CreateRevision <= rev:
		return evidenceDiffers, fmt.Sprintf("key %s was deleted at revision %d, the cluster's was created at %d and lives on", key, want.Mod, got.CreateRevision)
	case want.Deleted || got.ModRevision > rev:
		return evidenceNone, ""
	case equal():
		return evidenceSame, ""
	}
	return evidenceDiffers, fmt.Sprintf("key %s was written at revision %d, the cluster's last write of it is of revision %d", key, want.Mod, got.ModRevision)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

var (
	// ErrReplaced: a member of the cluster an uploader placed its backups
	// for restarted on another raft log (its raft index went back: a
	// restored data dir starts it again). Its events are another past's;
	// the uploader drops what it holds and places its backups again.
	ErrReplaced = errors.New("a member restarted on another raft log: the cluster was restored or replaced")
)
