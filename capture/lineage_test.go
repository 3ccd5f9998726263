package capture

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
)

// The placing table, read without a cluster or a store: each row from
// the facts it asks for, and the facts it asks for in turn.
func TestJudgeLineage(t *testing.T) {
	t0 := time.Unix(1_764_928_800, 0).UTC()
	full := snapshot.Snapshot{Kind: snapshot.KindFull, LastRevision: 100, Created: t0, Key: "v2/Full-00000000-00000100-1764928800"}
	chain := snapshot.Chain{Full: full, Deltas: []snapshot.Snapshot{{Kind: snapshot.KindDelta, StartRevision: 101, LastRevision: 200, Created: t0.Add(time.Minute)}}}
	const me, other = "aaaa", "bbbb"
	newest := snapshot.Timeline{ID: "3f9a0c21", Key: "etcdkit/timelines/1-3f9a0c21.json", Parent: snapshot.FirstTimeline, ForkRevision: 150, Began: t0.Add(time.Hour)}
	// facts of a store whose newest chain is chain, as far as the row
	// needs them; f changes them.
	facts := func(f func(*lineageFacts)) *lineageFacts {
		lf := &lineageFacts{cat: snapshot.Catalog{Timeline: snapshot.Timeline{ID: snapshot.FirstTimeline}}, ownFulls: true, chain: &chain,
			current: 250, cluster: me, lived: map[livedKey]lived{}, restoreKnown: true, identityKnown: true,
			identity: &snapshot.Identity{ClusterID: me}, pastKnown: true}
		f(lf)
		if lf.past.proven == 0 {
			// Read at the revision, the keys prove what they share.
			lf.past.proven = lf.past.shared
		}
		return lf
	}
	for _, tc := range []struct {
		name  string
		facts *lineageFacts
		need  needKind
		// want: "continue", "full" (a full next on the newest), "begin",
		// "refuse", "previous"; why is in the reason.
		want, why string
	}{
		{"no full on the store", facts(func(f *lineageFacts) { f.chain = nil }), needNothing, "full", "no full snapshot"},
		{"the restore record is asked for first", facts(func(f *lineageFacts) { f.restoreKnown = false }), needRestore, "", ""},
		{"the keys are the chain's to its end", facts(func(f *lineageFacts) { f.past.shared = 200 }), needNothing, "continue", "are those"},
		{"the keys are asked for", facts(func(f *lineageFacts) { f.pastKnown = false }), needPast, "", ""},
		{"another cluster's identity", facts(func(f *lineageFacts) { f.identity.ClusterID, f.linkedKnown = other, true }), needNothing, "refuse", "taken of cluster bbbb"},
		{"another cluster's, allowed beside", facts(func(f *lineageFacts) {
			f.identity.ClusterID, f.linkedKnown, f.allowNew = other, true, true
		}), needNothing, "begin", "as allowed"},
		{"another cluster's identity asks whether a restore linked them", facts(func(f *lineageFacts) { f.identity.ClusterID = other }), needLinked, "", ""},
		{"no identity: the members are asked for", facts(func(f *lineageFacts) { f.identity = nil }), needMembers, "", ""},
		{"no identity and none of the members", facts(func(f *lineageFacts) {
			f.identity, f.membersKnown, f.fullMembers, f.liveMems = nil, true, []string{"1"}, []string{"2"}
		}), needNothing, "refuse", "none of this cluster's"},
		{"restored without a record, behind the end", facts(func(f *lineageFacts) { f.current, f.past.shared = 160, 140 }), needNothing, "begin", "without a record"},
		{"the keys differ at every revision compared", facts(func(f *lineageFacts) { f.past.differs, f.past.why = true, "key /a differs" }), needNothing, "refuse", "agree with"},
		{"nothing tells, behind the end", facts(func(f *lineageFacts) { f.current = 150 }), needNothing, "refuse", "cannot be told"},
		{"nothing tells, past the end", facts(func(*lineageFacts) {}), needNothing, "begin", "cannot be told"},
		{"a restore to the chain's end, the keys agree", facts(func(f *lineageFacts) {
			f.restore = &snapshot.Restored{Timeline: snapshot.FirstTimeline, Snapshot: full.Key, Revision: 200, Created: t0.Add(2 * time.Minute)}
			f.past.shared = 200
		}), needNothing, "continue", "is recorded"},
		{"a restore to an earlier revision, bumped past the end: the keys agree only as they are now", facts(func(f *lineageFacts) {
			f.restore = &snapshot.Restored{Timeline: snapshot.FirstTimeline, Snapshot: full.Key, Revision: 150, RevisionBump: 1100, Created: t0.Add(2 * time.Minute)}
			f.current, f.past.shared, f.past.proven = 1300, 200, 140
		}), needNothing, "begin", "restored from"},
		{"a restore to an earlier revision", facts(func(f *lineageFacts) {
			f.restore = &snapshot.Restored{Timeline: snapshot.FirstTimeline, Snapshot: full.Key, Revision: 150, Created: t0.Add(2 * time.Minute)}
			f.past.shared = 150
		}), needNothing, "begin", "restored from"},
		{"a restore record the keys contradict is set aside", facts(func(f *lineageFacts) {
			f.restore = &snapshot.Restored{Timeline: "elsewhere", Snapshot: "v2/Full-x", Revision: 150, Created: t0.Add(2 * time.Minute)}
			f.past.shared = 200
		}), needNothing, "continue", "are those"},
		{"another cluster began the newest timeline", facts(func(f *lineageFacts) {
			f.cat.Timeline, f.ownFulls = snapshot.Timeline{ID: "x", Key: "k", ClusterID: other}, false
		}), needNothing, "refuse", "began"},
		{"this cluster began the newest timeline", facts(func(f *lineageFacts) {
			f.cat.Timeline, f.ownFulls = snapshot.Timeline{ID: "x", Key: "k", ClusterID: me}, false
		}), needNothing, "full", "first full snapshot is due"},
		{"an unreadable newest timeline", facts(func(f *lineageFacts) {
			f.cat.Timeline, f.ownFulls = snapshot.Timeline{ID: "x", Key: "k", Unreadable: true}, false
		}), needNothing, "previous", ""},
	} {
		o, n := judgeLineage(tc.facts)
		if n.what != tc.need {
			t.Errorf("%s: needs %d, want %d", tc.name, n.what, tc.need)
			continue
		}
		if tc.need != needNothing {
			continue
		}
		got, why := "full", o.reason
		switch {
		case o.previous:
			got = "previous"
		case o.refuse != "":
			got, why = "refuse", o.refuse
		case o.begin != nil:
			got, why = "begin", o.begin.Reason
		case o.continues:
			got = "continue"
		}
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %s (%s), want %s (…%s…)", tc.name, got, why, tc.want, tc.why)
		}
	}
	// A timeline this cluster began, forked where its keys agree with the
	// parent's chain further on: it lived on in the parent.
	f := facts(func(f *lineageFacts) {
		f.cat = snapshot.Catalog{Timeline: newest, Timelines: []snapshot.Timeline{{ID: snapshot.FirstTimeline}, newest}}
		f.cat.Timeline.ClusterID, f.ownFulls = me, false
	})
	if _, n := judgeLineage(f); n.what != needLived || n.from != snapshot.FirstTimeline || n.fork != 150 {
		t.Fatalf("a fork named by the newest timeline asks for the parent's chain: %+v", n)
	}
	f.lived[livedKey{snapshot.FirstTimeline, 150}] = lived{last: 200, full: full.Key, timeline: snapshot.Timeline{ID: snapshot.FirstTimeline}, past: pastResult{shared: 190, proven: 140}}
	if o, _ := judgeLineage(f); o.begin != nil && o.begin.ForkRevision == 190 {
		t.Fatalf("keys that agree only as they are now, none written past the fork, prove no life past it: %+v", o)
	}
	f.lived[livedKey{snapshot.FirstTimeline, 150}] = lived{last: 200, full: full.Key, timeline: snapshot.Timeline{ID: snapshot.FirstTimeline}, past: pastResult{shared: 190, proven: 190}}
	if o, _ := judgeLineage(f); o.begin == nil || o.begin.ForkRevision != 190 || o.begin.Parent != snapshot.FirstTimeline {
		t.Fatalf("a cluster whose keys are the parent's past the fork: %+v", o)
	}
}
