package capture

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/etcdkit/etcdkit/snapshot"
)

// lineageFacts is what Place knows when it decides where a cluster writes:
// what the catalog says, and what the placer gathered from the store and
// the cluster when the table asked for it (each with its known flag: a
// fact is gathered once, and only when a row needs it, since some cost a
// download or many reads of the cluster).
type lineageFacts struct {
	cat      snapshot.Catalog
	ownFulls bool            // the newest timeline holds a full of its own
	chain    *snapshot.Chain // its newest chain; nil: no full
	current  int64           // the cluster's revision
	cluster  string          // its ID (hex)
	allowNew bool            // PlaceOptions.AllowNewChain

	// restore is the newest record of a restore of the cluster's ID.
	restoreKnown bool
	restore      *snapshot.Restored
	// identity is the chain's identity record; nil: none.
	identityKnown bool
	identity      *snapshot.Identity
	// linked: an older version's records link the cluster to the
	// identity's (it was restored from it).
	linkedKnown, linked bool
	// For a chain without an identity: what its full's database left of
	// its keys and the members it names, and the cluster's members.
	membersKnown          bool
	fullTail              []snapshot.KeyVersion
	fullMembers, liveMems []string
	// past is the newest revision at which the cluster's keys are those
	// the chain left (sharedPast).
	pastKnown bool
	past      pastResult
	// lived are the other timelines' chains the cluster may have lived on
	// in, by timeline and fork revision.
	lived map[livedKey]lived
}

type pastResult struct {
	shared  int64
	differs bool
	why     string
	// proven is how far the keys that agreed prove the past (compareLive):
	// shared, or less when shared's revision is compacted on the cluster.
	proven int64
}

type livedKey struct {
	from string
	fork int64
}

// lived is what a timeline's newest chain says of the cluster: gathered
// only as far as the table needs (shared only for a chain past the fork).
type lived struct {
	noChain  bool
	last     int64
	full     string
	timeline snapshot.Timeline
	past     pastResult
}

// need is a fact the table asks for before it can decide.
type need struct {
	what needKind
	// from and fork: the timeline and revision of needLived.
	from string
	fork int64
}

type needKind int

const (
	needNothing needKind = iota
	needRestore
	needIdentity
	needLinked
	needMembers
	needPast
	needLived
)

// outcome is the table's decision.
type outcome struct {
	// previous: the newest timeline's record cannot be read and it holds
	// no full; decide on the timeline before it, then begin one after
	// both (pastUnreadable).
	previous bool
	// continues the newest chain (or, false, writes a full next) on the
	// newest timeline, for reason.
	continues bool
	reason    string
	// begin is a timeline to begin for this cluster.
	begin *snapshot.Timeline
	// refuse: the chain is another cluster's, for this reason.
	refuse string
	// adopt: record the identity the chain was found to have.
	adopt bool
	// setAside is a restore record the cluster's keys contradict.
	setAside *snapshot.Restored
}

// judgeLineage is Place's decision table. It reads only the facts: when a
// row needs one not gathered yet it returns it as a need, and the placer
// gathers it and asks again. A cluster appends to the newest timeline's
// newest chain only on positive evidence that the chain is its past up to
// the end; another cluster's chain is refused (or, allowed, a timeline
// begins beside it); anything else begins a timeline forked where the
// cluster's past and the chain's part.
func judgeLineage(f *lineageFacts) (outcome, need) {
	t := f.cat.Timeline
	began := t.Key != "" && t.ClusterID == f.cluster // by this cluster
	switch {
	case t.Unreadable && !f.ownFulls:
		return outcome{previous: true}, need{}
	case t.Key != "" && t.ClusterID != f.cluster && !f.ownFulls:
		return f.foreign(fmt.Sprintf("cluster %s began %s and has written no full snapshot there yet", t.ClusterID, t)), need{}
	case began && !f.ownFulls:
		if o, n, ok := f.livedOn(t.Parent, t.ForkRevision, fmt.Sprintf("%s names this cluster, restored to revision %d", t, t.ForkRevision)); ok {
			return o, n
		}
	}
	if f.chain == nil {
		return outcome{reason: "the store holds no full snapshot to continue"}, need{}
	}
	chain, end := *f.chain, f.chain.LastRevision()
	if !f.restoreKnown {
		return outcome{}, need{what: needRestore}
	}
	var aside *snapshot.Restored
	if rr := f.restore; rr != nil && !rr.Created.Before(chain.Full.Created) {
		if began && !t.Began.Before(rr.Created) {
			return outcome{reason: fmt.Sprintf("the cluster began %s after its restore; its first full snapshot is due", t)}, need{}
		}
		o, n, ok := f.byRecord(*rr)
		if ok {
			return o, n
		}
		aside = rr
	}
	o, n := f.byKeys(chain, end)
	o.setAside = aside
	return o, n
}

// byKeys decides, without a restore record to go by, from the chain's
// identity and the cluster's own keys.
func (f *lineageFacts) byKeys(chain snapshot.Chain, end int64) (outcome, need) {
	t := f.cat.Timeline
	if t.Key != "" && t.ClusterID == f.cluster && !f.ownFulls {
		return outcome{reason: fmt.Sprintf("the cluster began %s; its first full snapshot is due", t)}, need{}
	}
	if !f.identityKnown {
		return outcome{}, need{what: needIdentity}
	}
	id := f.identity
	if id != nil && id.ClusterID != f.cluster {
		if !f.linkedKnown {
			return outcome{}, need{what: needLinked}
		}
		if !f.linked {
			return f.foreign(fmt.Sprintf("%s was taken of cluster %s, this is cluster %s", chain.Full.Key, id.ClusterID, f.cluster)), need{}
		}
	}
	if id == nil {
		// The full's own database names the members it was taken of.
		if !f.membersKnown {
			return outcome{}, need{what: needMembers}
		}
		if !slices.ContainsFunc(f.fullMembers, func(m string) bool { return slices.Contains(f.liveMems, m) }) {
			return f.foreign(fmt.Sprintf("%s has no identity record and its database names members %s, none of this cluster's (%s)",
				chain.Full.Key, strings.Join(f.fullMembers, ","), strings.Join(f.liveMems, ","))), need{}
		}
	}
	if end <= 1 {
		// Every cluster's past at revision 1 is the same empty keyspace.
		return outcome{continues: true, reason: fmt.Sprintf("%s ends at revision %d, before any key was written", t, end)}, need{}
	}
	if !f.pastKnown {
		return outcome{}, need{what: needPast}
	}
	shared, differs, why := f.past.shared, f.past.differs, f.past.why
	if shared != end && shared <= t.ForkRevision {
		// The cluster shares no more than the past the newest timeline
		// inherited: it may be the one that went on in the parent, not
		// one restored to the fork (the cluster of the old timeline
		// started again beside a clone restored from it).
		if o, n, ok := f.livedOn(t.Parent, t.ForkRevision, fmt.Sprintf("%s forked at revision %d", t, t.ForkRevision)); ok {
			return o, n
		}
	}
	fork := func(reason string) (outcome, need) {
		return outcome{begin: &snapshot.Timeline{Parent: t.ID, ForkRevision: shared, ForkSnapshot: chain.Full.Key, Reason: reason}}, need{}
	}
	switch {
	case shared == end:
		return outcome{continues: true, adopt: id == nil, reason: fmt.Sprintf("the cluster's keys at revision %d are those %s left", end, t)}, need{}
	case shared > 0 && f.current < end:
		return fork(fmt.Sprintf("the cluster is at revision %d, below the end of %s (%d), and its keys at revision %d are the chain's: it was restored to an earlier revision without a record of it", f.current, t, end, shared))
	case shared > 0 && differs:
		return fork(fmt.Sprintf("the cluster's keys at revision %d differ from those %s left (%s), and at revision %d they are the chain's: it was restored to an earlier revision without a record of it", end, t, why, shared))
	case shared > 0:
		// Unknown is no answer: the chain's past is certain only to shared.
		return fork(fmt.Sprintf("the cluster's keys at revision %d are the chain's, and whether its revisions since, to the end of %s (%d), are cannot be told (%s)", shared, t, end, cmp.Or(why, "no key compared tells")))
	case differs:
		// The same cluster ID and no revision where the keys agree: another
		// deployment of the same configuration (etcd derives the IDs from
		// the names, peer URLs and token alone), not this cluster's past.
		return f.foreign(fmt.Sprintf("this cluster's keys agree with %s at none of the revisions compared (%s)", chain.Full.Key, why)), need{}
	case f.current < end:
		// Behind the chain and no key to compare: a restore of this
		// cluster or a twin of its configuration; unknown is no answer.
		return f.foreign(fmt.Sprintf("this cluster (at revision %d, below the chain's end %d) has the chain's cluster ID, and whether its past is the chain's cannot be told (%s)", f.current, end, why)), need{}
	}
	// Past the chain's end and nothing tells (its end is compacted and
	// every key compared was written since): begin a timeline that shares
	// no past, so that no chain mixes two.
	return outcome{begin: &snapshot.Timeline{Parent: t.ID, ForkSnapshot: chain.Full.Key,
		Reason: fmt.Sprintf("whether the cluster's past is that of %s cannot be told (%s)", t, why)}}, need{}
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
func (f *lineageFacts) byRecord(rr snapshot.Restored) (outcome, need, bool) {
	t, chain := f.cat.Timeline, *f.chain
	end := chain.LastRevision()
	if !f.identityKnown {
		return outcome{}, need{what: needIdentity}, true
	}
	if !f.pastKnown {
		return outcome{}, need{what: needPast}, true
	}
	shared, differs, why := f.past.shared, f.past.differs, f.past.why
	sameChain := rr.Timeline == t.ID && rr.Snapshot == chain.Full.Key
	if shared == end && f.past.proven <= rr.Revision && rr.Revision < end {
		// The keys agree only as they are now, past a compaction, and
		// none written after the recorded revision: a cluster restored
		// there (and bumped past the end) holds the same. The record
		// stands.
		shared = f.past.proven
	}
	switch {
	case sameChain && shared == end && rr.Revision == end:
		return outcome{continues: true, reason: fmt.Sprintf("a restore of this cluster's ID from %s to revision %d, the end of %s, is recorded, and the cluster's keys there are those it left", rr.Snapshot, rr.Revision, t)}, need{}, true
	case sameChain && shared == end:
		return outcome{continues: true, reason: fmt.Sprintf("the cluster's keys at revision %d are those %s left: the restore of its ID to revision %d recorded since is not what it runs from", end, t, rr.Revision)}, need{}, true
	case sameChain && rr.Revision == end && !differs:
		return outcome{continues: true, reason: fmt.Sprintf("a restore of this cluster's ID from %s to revision %d, the end of %s, is recorded, and none of the cluster's keys says otherwise (%s)", rr.Snapshot, rr.Revision, t, cmp.Or(why, "no key compared tells"))}, need{}, true
	case shared == end, rr.Revision == end && sameChain:
		// The cluster's own keys contradict the record: set aside.
		return outcome{}, need{}, false
	}
	fork := rr.Revision
	if _, ok := f.cat.FindTimeline(rr.Timeline); !ok {
		fork = 0
	}
	if o, n, ok := f.livedOn(rr.Timeline, fork, fmt.Sprintf("a restore of this cluster's ID from %s to revision %d is recorded", rr.Snapshot, rr.Revision)); ok {
		return o, n, true
	}
	return outcome{begin: &snapshot.Timeline{Parent: cmp.Or(rr.Timeline, t.ID), ForkRevision: fork, ForkSnapshot: rr.Snapshot,
		Reason: fmt.Sprintf("restored from %s at revision %d, while %s went on to revision %d", rr.Snapshot, rr.Revision, t, end)}}, need{}, true
}

// livedOn is for a cluster said to have been restored to revision fork
// of timeline from (by the newest timeline, which forked there and names
// it, or by a record of a restore of its ID), which the newest timeline
// is no past of: when the cluster's own keys are from's past that
// revision, the cluster lived on in from and was never restored (a
// record added by hand, which a locked bucket keeps, or the old
// timeline's cluster started again beside a clone restored from it). It
// begins a timeline of its own from there at the revision the keys
// share, instead of going on in a past it never had. ok: decided, or a
// fact is needed; what says what said otherwise.
func (f *lineageFacts) livedOn(from string, fork int64, what string) (outcome, need, bool) {
	if from == "" || fork <= 0 || f.current <= fork {
		return outcome{}, need{}, false
	}
	// A timeline the store does not hold, or one without a chain past
	// the fork, tells nothing against what said so.
	if _, ok := f.cat.FindTimeline(from); !ok {
		return outcome{}, need{}, false
	}
	l, ok := f.lived[livedKey{from, fork}]
	if !ok {
		return outcome{}, need{what: needLived, from: from, fork: fork}, true
	}
	// Keys that agree only as they are now prove no write after the
	// fork: a cluster restored there holds them the same.
	if l.noChain || l.last <= fork || l.past.shared <= fork || l.past.proven <= fork {
		return outcome{}, need{}, false
	}
	return outcome{begin: &snapshot.Timeline{Parent: from, ForkRevision: l.past.shared, ForkSnapshot: l.full,
		Reason: fmt.Sprintf("%s, but the cluster's keys at revision %d are those %s left: it went on in %s, not from revision %d", what, l.past.shared, l.timeline, from, fork)}}, need{}, true
}

// foreign refuses another cluster's chain, or begins a timeline beside it
// when allowed.
func (f *lineageFacts) foreign(why string) outcome {
	if !f.allowNew {
		return outcome{refuse: why}
	}
	return outcome{begin: &snapshot.Timeline{Parent: f.cat.Timeline.ID, Reason: "a new chain beside another cluster's, as allowed: " + why}}
}
