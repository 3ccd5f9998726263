package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func full(last int64, created time.Time) snapshot.Snapshot {
	return mustParse(fmt.Sprintf("v2/Full-00000000-%08d-%d", last, created.Unix()))
}

func delta(start, last int64, created time.Time) snapshot.Snapshot {
	return mustParse(fmt.Sprintf("v2/Incr-%08d-%08d-%d", start, last, created.Unix()))
}

func mustParse(key string) snapshot.Snapshot {
	s, err := snapshot.Parse(key)
	if err != nil {
		panic(err)
	}
	return s
}

func keys(snaps []snapshot.Snapshot) string {
	var out []string
	for _, s := range snaps {
		out = append(out, strings.TrimPrefix(s.Key, "v2/"))
	}
	return strings.Join(out, " ")
}

func TestListSortsNumericallyAndSkipsStrangers(t *testing.T) {
	ctx := context.Background()
	st := store.NewMem()
	for _, key := range []string{
		"v2/Incr-100000000-100000005-1700000100",
		"v2/Full-00000000-99999999-1700000000",
		"v2/Incr-00000001-00000009-1700000000.gz",
		"v2/notes.txt",
		"v2/Full-00000000-00000010-1700000000/0000001",
		"other/Full-00000000-00000010-1700000000",
		"v1/Backup-1600000000/Full-00000000-00000042-1600000000",
	} {
		if err := st.Put(ctx, key, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range cat.Snapshots {
		got = append(got, s.Key)
		if s.Size != 1 {
			t.Errorf("%s: size %d", s.Key, s.Size)
		}
	}
	want := []string{
		"v2/Incr-00000001-00000009-1700000000.gz",
		"v1/Backup-1600000000/Full-00000000-00000042-1600000000",
		"v2/Full-00000000-99999999-1700000000",
		"v2/Incr-100000000-100000005-1700000100",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestChainSelection(t *testing.T) {
	cat := snapshot.NewCatalog([]snapshot.Snapshot{
		full(100, t0),
		delta(101, 150, t0.Add(1*time.Minute)),
		delta(151, 200, t0.Add(2*time.Minute)),
		full(200, t0.Add(2*time.Minute+30*time.Second)),
		delta(201, 250, t0.Add(3*time.Minute)),
		delta(251, 300, t0.Add(4*time.Minute)),
	})

	latest, err := cat.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if latest.Full.LastRevision != 200 || len(latest.Deltas) != 2 || latest.LastRevision() != 300 {
		t.Fatalf("latest: %s", keys(latest.Snapshots()))
	}

	at170, err := cat.ContainingRevision(170)
	if err != nil {
		t.Fatal(err)
	}
	if at170.Full.LastRevision != 100 || len(at170.Deltas) != 2 || at170.UntilRevision != 170 {
		t.Fatalf("revision 170: %s until %d", keys(at170.Snapshots()), at170.UntilRevision)
	}
	at260, _ := cat.ContainingRevision(260)
	if at260.Full.LastRevision != 200 || len(at260.Deltas) != 2 {
		t.Fatalf("revision 260: %s", keys(at260.Snapshots()))
	}
	if _, err := cat.ContainingRevision(301); !errors.Is(err, snapshot.ErrNotCovered) {
		t.Fatalf("revision 301: %v", err)
	}
	if _, err := cat.ContainingRevision(99); !errors.Is(err, snapshot.ErrNoFull) {
		t.Fatalf("revision 99: %v", err)
	}

	asOf, err := cat.AsOf(t0.Add(90 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// The delta written at 2m may hold events from before 1m30s.
	if asOf.Full.LastRevision != 100 || len(asOf.Deltas) != 2 || !asOf.UntilTime.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("as of 1m30s: %s", keys(asOf.Snapshots()))
	}
	if _, err := cat.AsOf(t0.Add(-time.Second)); !errors.Is(err, snapshot.ErrNoFull) {
		t.Fatalf("before the first full: %v", err)
	}
}

// A delta whose upload was lost (its sidecar stopped first) leaves a gap
// after the full taken before it: a time after that full restores the
// newest state the backups hold by then, up to the gap, not an error.
func TestAsOfStopsAtALostUpload(t *testing.T) {
	cat := snapshot.NewCatalog([]snapshot.Snapshot{
		full(100, t0),
		delta(101, 150, t0.Add(1*time.Second)),
		// 151-200 were never uploaded.
		full(200, t0.Add(6*time.Second)),
		delta(201, 250, t0.Add(11*time.Second)),
	})
	asOf, err := cat.AsOf(t0.Add(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	checked, err := asOf.Check()
	if err != nil {
		t.Fatalf("as of 2s: %v", err)
	}
	if checked.Full.LastRevision != 100 || checked.LastRevision() != 150 {
		t.Fatalf("as of 2s: %s", keys(checked.Snapshots()))
	}
	// Past the next full, its chain.
	if asOf, err := cat.AsOf(t0.Add(8 * time.Second)); err != nil || asOf.Full.LastRevision != 200 || len(asOf.Deltas) != 1 {
		t.Fatalf("as of 8s: %s, %v", keys(asOf.Snapshots()), err)
	}
}

func TestChainCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		snaps []snapshot.Snapshot
		until int64
		want  string // kept deltas, or the error
	}{
		{"contiguous", []snapshot.Snapshot{full(100, t0), delta(101, 150, t0), delta(151, 200, t0)}, 0,
			"Incr-00000101-00000150 Incr-00000151-00000200"},
		{"overlap after a handoff is kept, covered delta dropped", []snapshot.Snapshot{
			full(100, t0), delta(101, 150, t0), delta(120, 180, t0), delta(130, 140, t0), delta(181, 200, t0),
		}, 0, "Incr-00000101-00000150 Incr-00000120-00000180 Incr-00000181-00000200"},
		{"delta covered by the full", []snapshot.Snapshot{full(100, t0), delta(90, 100, t0), delta(101, 110, t0)}, 0,
			"Incr-00000101-00000110"},
		{"same start, longer wins", []snapshot.Snapshot{full(100, t0), delta(101, 120, t0), delta(101, 150, t0)}, 0,
			"Incr-00000101-00000150"},
		{"gap", []snapshot.Snapshot{full(100, t0), delta(101, 150, t0), delta(161, 200, t0), delta(250, 260, t0)}, 0,
			"misses revisions 151-160, 201-249"},
		{"gap past the target revision does not matter", []snapshot.Snapshot{full(100, t0), delta(101, 150, t0), delta(161, 200, t0)}, 140,
			"Incr-00000101-00000150"},
		{"gap right after the full", []snapshot.Snapshot{full(100, t0), delta(105, 150, t0)}, 0, "misses revisions 101-104"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := snapshot.Chain{Full: tc.snaps[0], Deltas: tc.snaps[1:], UntilRevision: tc.until}
			got, err := ch.Check()
			var out string
			if err != nil {
				out = err.Error()
				var gap *snapshot.GapError
				if !errors.As(err, &gap) {
					t.Fatalf("not a GapError: %v", err)
				}
			} else {
				var names []string
				for _, d := range got.Deltas {
					names = append(names, d.Key[3:25])
				}
				out = strings.Join(names, " ")
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("got %q, want %q", out, tc.want)
			}
		})
	}
	if _, err := (snapshot.Chain{Deltas: []snapshot.Snapshot{delta(101, 150, t0)}}).Check(); !errors.Is(err, snapshot.ErrNoFull) {
		t.Fatalf("chain without its full: %v", err)
	}
}

func TestLegacyChainsStayInTheirDirectory(t *testing.T) {
	cat := snapshot.NewCatalog([]snapshot.Snapshot{
		mustParse("v1/Backup-100/Full-00000000-00000010-100"),
		mustParse("v1/Backup-100/Incr-00000011-00000020-110"),
		mustParse("v1/Backup-200/Full-00000000-00000015-200"),
		mustParse("v1/Backup-200/Incr-00000016-00000030-210"),
	})
	ch, err := cat.ContainingRevision(18)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Full.Key != "v1/Backup-200/Full-00000000-00000015-200" || len(ch.Deltas) != 1 || ch.Deltas[0].Key != "v1/Backup-200/Incr-00000016-00000030-210" {
		t.Fatalf("got %v", ch.Snapshots())
	}
}

// Chains groups each full with the deltas up to the next full; a delta
// that closes a chain at the next full's revision stays with the older one.
func TestChainsView(t *testing.T) {
	cat := snapshot.NewCatalog([]snapshot.Snapshot{
		full(10, t0), delta(11, 20, t0), delta(21, 30, t0),
		full(30, t0.Add(time.Hour)), delta(31, 40, t0), delta(41, 45, t0),
		full(50, t0.Add(2*time.Hour)),
	})
	var got []string
	for _, ch := range cat.Chains() {
		got = append(got, keys(ch.Snapshots()))
	}
	want := []string{
		"Full-00000000-00000010-1793491200 Incr-00000011-00000020-1793491200 Incr-00000021-00000030-1793491200",
		"Full-00000000-00000030-1793494800 Incr-00000031-00000040-1793491200 Incr-00000041-00000045-1793491200",
		"Full-00000000-00000050-1793498400",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// Continuing runs across fulls from the revision asked, skips what is
// covered, prefers the longer of two deltas that start together and stops
// at the first gap.
func TestContinuing(t *testing.T) {
	cat := snapshot.NewCatalog([]snapshot.Snapshot{
		full(10, t0), delta(11, 20, t0), delta(21, 30, t0),
		full(30, t0.Add(time.Hour)), delta(31, 35, t0), delta(31, 40, t0), delta(41, 50, t0),
		delta(60, 70, t0),
	})
	for _, c := range []struct {
		rev  int64
		want string
	}{
		{10, "11-20 21-30 31-40 41-50"},
		{25, "21-30 31-40 41-50"},
		{50, ""},
		{70, ""},
	} {
		var got []string
		for _, d := range cat.Continuing(full(10, t0), c.rev) {
			got = append(got, fmt.Sprintf("%d-%d", d.StartRevision, d.LastRevision))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("from revision %d: %q, want %q", c.rev, got, c.want)
		}
	}
	legacy := snapshot.NewCatalog([]snapshot.Snapshot{
		mustParse("v1/Backup-100/Full-00000000-00000010-100"), mustParse("v1/Backup-100/Incr-00000011-00000020-110"),
		delta(11, 30, t0),
	})
	if got := legacy.Continuing(mustParse("v1/Backup-100/Full-00000000-00000010-100"), 10); len(got) != 1 || got[0].Key != "v1/Backup-100/Incr-00000011-00000020-110" {
		t.Fatalf("a v1 standby continues with %v, want its own directory's delta", got)
	}
}

// put writes empty objects under the keys of snaps.
func put(t *testing.T, st store.Store, snaps ...snapshot.Snapshot) {
	t.Helper()
	for _, s := range snaps {
		if err := st.Put(context.Background(), s.Key, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
}

// A cluster restored to revision 150 of a history that went on to 225
// forks it: its objects form a timeline of their own, placed by the
// record written before them (an object of the old writer named with the
// record's second stays the old one's), and never join the old chain.
// The new timeline reads the shared past up to 150 from the old one, and
// nothing of the old past after it; the old timeline stays whole.
func TestTimelines(t *testing.T) {
	ctx := context.Background()
	st := store.NewMem()
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	oldFull, d1, d2, late := full(100, m(0)), delta(101, 150, m(1)), delta(151, 221, m(2)), delta(222, 225, m(10))
	put(t, st, oldFull, d1, d2, late)
	before, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := snapshot.BeginTimeline(ctx, st, snapshot.Timeline{Parent: snapshot.FirstTimeline, ForkRevision: 150, ForkSnapshot: oldFull.Key, ClusterID: "c"}, m(10), before.All())
	if err != nil {
		t.Fatal(err)
	}
	newFull, nd := full(152, m(11)), delta(153, 230, m(12))
	put(t, st, newFull, nd)

	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if cat.Timeline.ID != tl.ID || !cat.Newest() || len(cat.Timelines) != 2 {
		t.Fatalf("the newest timeline: %+v of %d", cat.Timeline, len(cat.Timelines))
	}
	if got := keys(cat.Own()); got != keys([]snapshot.Snapshot{newFull, nd}) {
		t.Fatalf("the new timeline's own objects: %s", got)
	}
	latest, err := cat.Latest()
	if err != nil || keys(latest.Snapshots()) != keys([]snapshot.Snapshot{newFull, nd}) || latest.LastRevision() != 230 {
		t.Fatalf("latest of the new timeline: %s %v", keys(latest.Snapshots()), err)
	}
	// The old timeline reaches 225: past a restore to 200, not past 230.
	if b := cat.Beyond(230); len(b) != 0 {
		t.Fatalf("beyond 230: %+v", b)
	}
	if b := cat.Beyond(200); len(b) != 1 || b[0].Timeline.ID != snapshot.FirstTimeline || b[0].LastRevision != 225 {
		t.Fatalf("beyond 200: %+v", b)
	}
	for _, tc := range []struct {
		rev  int64
		want string
	}{
		{140, keys([]snapshot.Snapshot{oldFull, d1})},
		{150, keys([]snapshot.Snapshot{oldFull, d1})},
		{151, ""},
		{200, keys([]snapshot.Snapshot{newFull, nd})},
	} {
		ch, err := cat.ContainingRevision(tc.rev)
		if tc.want == "" {
			if !errors.Is(err, snapshot.ErrNotCovered) {
				t.Fatalf("revision %d, past the shared past and before the new timeline's own: %v", tc.rev, err)
			}
			t.Log(err)
			continue
		}
		if err != nil || keys(ch.Snapshots()) != tc.want {
			t.Fatalf("revision %d: %s, %v; want %s", tc.rev, keys(ch.Snapshots()), err, tc.want)
		}
		if checked, err := ch.Check(); err != nil || checked.UntilRevision != tc.rev {
			t.Fatalf("revision %d: checked %+v %v", tc.rev, checked, err)
		}
	}
	// As of a time of the shared past: the old chain, up to the fork.
	asOf, err := cat.AsOf(m(1).Add(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if checked, err := asOf.Check(); err != nil || checked.Full.Key != oldFull.Key || checked.Ceiling != 150 || checked.UntilRevision != 0 {
		t.Fatalf("as of a time of the shared past: %+v %v", checked, err)
	}
	old, err := cat.On(snapshot.FirstTimeline)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := old.Latest(); err != nil || keys(ch.Snapshots()) != keys([]snapshot.Snapshot{oldFull, d1, d2, late}) || ch.LastRevision() != 225 {
		t.Fatalf("the old timeline's latest: %s %v", keys(ch.Snapshots()), err)
	}
	if chains := cat.AllChains(); len(chains) != 2 || chains[0].Timeline != snapshot.FirstTimeline || chains[1].Timeline != tl.ID {
		t.Fatalf("all chains: %+v", chains)
	}
	if _, err := cat.On("nope"); !errors.Is(err, snapshot.ErrNoTimeline) {
		t.Fatalf("an unknown timeline: %v", err)
	}
	// A timeline whose first full has not landed reads the shared past.
	if err := st.Delete(ctx, newFull.Key); err != nil {
		t.Fatal(err)
	}
	if cat, err = snapshot.List(ctx, st); err != nil {
		t.Fatal(err)
	}
	ch, err := cat.Latest()
	if err != nil || ch.Full.Key != oldFull.Key || ch.LastRevision() != 150 {
		t.Fatalf("latest of a timeline without a full of its own: %s (to %d) %v", keys(ch.Snapshots()), ch.LastRevision(), err)
	}
	if checked, err := ch.Check(); err != nil || checked.UntilRevision != 150 || len(checked.Deltas) != 1 {
		t.Fatalf("it restores the shared past to 150: %+v %v", checked, err)
	}
	// A restore of that latest chain leaves out the old timeline's 225,
	// as a forged record of a fork would: said.
	if b := cat.Beyond(ch.LastRevision()); len(b) != 1 || b[0].LastRevision != 225 {
		t.Fatalf("beyond the shared past: %+v", b)
	}
}

// Retention keeps each timeline's past by the policy's ages apart: the
// old timeline's pre-incident head lives as long as any full of its age,
// and the newest timeline's newest chain always.
func TestRetentionPerTimeline(t *testing.T) {
	ctx := context.Background()
	st := store.NewMem()
	now := t0.Add(60 * 24 * time.Hour)
	h := func(hours int) time.Time { return now.Add(-time.Duration(hours) * time.Hour) }
	ancient, oldHead, oldDelta := full(100, h(40*24)), full(200, h(2)), delta(201, 300, h(2).Add(time.Minute))
	put(t, st, ancient, oldHead, oldDelta)
	before, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.BeginTimeline(ctx, st, snapshot.Timeline{Parent: snapshot.FirstTimeline, ForkRevision: 250}, h(1), before.All()); err != nil {
		t.Fatal(err)
	}
	// The new timeline's fulls, the same hour as the old head.
	a, b := full(251, h(1).Add(time.Minute)), full(400, h(1).Add(30*time.Minute))
	put(t, st, a, b)
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	expired := snapshot.Retention{}.Expired(cat, now)
	if got := keys(expired); got != keys([]snapshot.Snapshot{ancient}) {
		t.Fatalf("expired %s, want only the four-week-old full", got)
	}
	if got := keys(snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1}.Expired(cat, now)); got != keys([]snapshot.Snapshot{ancient, a}) {
		t.Fatalf("LimitBased 1 expired %s: each timeline keeps its newest", got)
	}
}

// An empty store says so, not only that it holds no full snapshot: the
// URL is the likelier mistake.
func TestLatestOfAnEmptyStore(t *testing.T) {
	_, err := snapshot.Catalog{}.Latest()
	if !errors.Is(err, snapshot.ErrNoFull) || !strings.Contains(err.Error(), "holds no backups at all") {
		t.Fatalf("latest of an empty catalog: %v", err)
	}
}
