package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// weeks is five weeks of hourly fulls with a delta every 10 minutes, ten
// revisions each, ending at now.
func weeks(now time.Time) snapshot.Catalog {
	var snaps []snapshot.Snapshot
	rev := int64(1)
	for at := now.Add(-35 * 24 * time.Hour); !at.After(now); at = at.Add(10 * time.Minute) {
		if at.Sub(now)%time.Hour == 0 {
			snaps = append(snaps, full(rev, at))
		}
		if at.Before(now) {
			snaps = append(snaps, delta(rev+1, rev+10, at.Add(10*time.Minute)))
		}
		rev += 10
	}
	return snapshot.NewCatalog(snaps)
}

func split(cat snapshot.Catalog, expired []snapshot.Snapshot) (fulls, deltas []snapshot.Snapshot) {
	for _, s := range cat.Snapshots {
		if slices.ContainsFunc(expired, func(e snapshot.Snapshot) bool { return e.Key == s.Key }) {
			continue
		}
		if s.Kind == snapshot.KindFull {
			fulls = append(fulls, s)
		} else {
			deltas = append(deltas, s)
		}
	}
	return fulls, deltas
}

func TestExponentialRetention(t *testing.T) {
	now := t0.Add(40 * 24 * time.Hour)
	cat := weeks(now)
	expired := snapshot.Retention{}.Expired(cat, now)
	fulls, deltas := split(cat, expired)

	// 1 of the last hour, 23 hourly, 6 daily, 3 weekly.
	if len(fulls) != 33 {
		t.Fatalf("%d fulls kept, want 33", len(fulls))
	}
	count := func(from, to time.Duration) int {
		n := 0
		for _, f := range fulls {
			if age := now.Sub(f.Created); age >= from && age < to {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		from, to time.Duration
		want     int
	}{
		{0, time.Hour, 1},
		{time.Hour, 24 * time.Hour, 23},
		{24 * time.Hour, 7 * 24 * time.Hour, 6},
		{7 * 24 * time.Hour, 28 * 24 * time.Hour, 3},
		{28 * 24 * time.Hour, 100 * 24 * time.Hour, 0},
	} {
		if got := count(tc.from, tc.to); got != tc.want {
			t.Errorf("fulls aged %v-%v: %d kept, want %d", tc.from, tc.to, got, tc.want)
		}
	}
	// Each kept daily full is the newest of its day.
	for _, f := range fulls {
		age := now.Sub(f.Created)
		if age >= 24*time.Hour && age < 7*24*time.Hour && age%(24*time.Hour) != 0 {
			t.Errorf("kept %s, %v old: not the newest of its day", f.Key, age)
		}
	}
	// DeltaRetention 0: every delta past the oldest kept full stays.
	oldest := fulls[0].LastRevision
	for _, d := range deltas {
		if d.LastRevision <= oldest {
			t.Errorf("kept %s, which no kept full precedes", d.Key)
		}
	}
	if want := len(cat.Snapshots) - len(fulls) - len(expired); len(deltas) != want {
		t.Errorf("%d deltas kept, want %d", len(deltas), want)
	}
}

func TestRetentionNeverTouchesTheNewestChain(t *testing.T) {
	now := t0.Add(100 * 24 * time.Hour)
	// Everything is months old: only the newest chain may survive.
	cat := snapshot.NewCatalog([]snapshot.Snapshot{
		full(10, t0), delta(11, 20, t0), full(20, t0.Add(time.Hour)), delta(21, 30, t0.Add(2*time.Hour)), delta(31, 40, t0.Add(3*time.Hour)),
		mustParse("v1/Backup-100/Full-00000000-00000005-100"),
	})
	for _, r := range []snapshot.Retention{
		{}, {Policy: snapshot.LimitBased, MaxFulls: 1}, {DeltaRetention: time.Second},
	} {
		fulls, deltas := split(cat, r.Expired(cat, now))
		if len(fulls) != 2 || fulls[0].Key != "v1/Backup-100/Full-00000000-00000005-100" || fulls[1].LastRevision != 20 {
			t.Errorf("%+v kept fulls %s", r, keys(fulls))
		}
		if len(deltas) != 2 || deltas[0].StartRevision != 21 {
			t.Errorf("%+v kept deltas %s", r, keys(deltas))
		}
	}
}

func TestLimitBasedRetentionAndDeltaRetention(t *testing.T) {
	now := t0.Add(40 * 24 * time.Hour)
	cat := weeks(now)
	r := snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 5, DeltaRetention: 90 * time.Minute}
	fulls, deltas := split(cat, r.Expired(cat, now))
	if len(fulls) != 5 || now.Sub(fulls[0].Created) != 4*time.Hour {
		t.Fatalf("kept %s", keys(fulls))
	}
	// Chains superseded more than 90 minutes ago lose their deltas: the
	// chain superseded an hour ago keeps its six, the one superseded now
	// its six, the newest has none yet.
	for _, d := range deltas {
		if d.LastRevision <= fulls[len(fulls)-3].LastRevision {
			t.Errorf("kept %s of a chain superseded %v ago", d.Key, now.Sub(fulls[len(fulls)-3].Created))
		}
	}
	if len(deltas) != 12 {
		t.Errorf("kept %d deltas, want 12", len(deltas))
	}
}

func TestGCDryRunThenDelete(t *testing.T) {
	ctx := context.Background()
	now := t0.Add(40 * 24 * time.Hour)
	st := store.NewMem()
	cat := weeks(now)
	putAll(ctx, t, st, cat.Snapshots)
	clock := func() time.Time { return now }
	planned, err := snapshot.GC(ctx, st, snapshot.Retention{}, snapshot.GCOptions{DryRun: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if after, _ := snapshot.List(ctx, st); len(after.Snapshots) != len(cat.Snapshots) {
		t.Fatalf("dry run deleted %d objects", len(cat.Snapshots)-len(after.Snapshots))
	}
	res, err := snapshot.GC(ctx, st, snapshot.Retention{}, snapshot.GCOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	deleted := res.Deleted
	if keys(deleted) != keys(planned.Deleted) || len(deleted) == 0 {
		t.Fatalf("dry run planned %d, GC deleted %d", len(planned.Deleted), len(deleted))
	}
	after, _ := snapshot.List(ctx, st)
	if len(after.Snapshots) != len(cat.Snapshots)-len(deleted) {
		t.Fatalf("%d left, want %d", len(after.Snapshots), len(cat.Snapshots)-len(deleted))
	}
	if again, _ := snapshot.GC(ctx, st, snapshot.Retention{}, snapshot.GCOptions{Now: clock}); len(again.Deleted) != 0 {
		t.Fatalf("a second GC deleted %d more", len(again.Deleted))
	}
}

// putAll writes snaps with placeholder content, each full with the
// identity record its writer leaves, which retention takes as the word
// that it holds what its name says.
func putAll(ctx context.Context, t *testing.T, st store.Store, snaps []snapshot.Snapshot) {
	t.Helper()
	for _, s := range snaps {
		if err := st.Put(ctx, s.Key, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
		if s.Kind == snapshot.KindFull {
			if err := snapshot.WriteIdentity(ctx, st, s, snapshot.Identity{ClusterID: "1"}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Fulls that do not hold what their names say (here, placeholders
// without an identity record) are neither counted nor deleted, and a
// full that cannot be read for the store failing stops GC.
func TestGCCountsOnlyFullsThatHoldTheirNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	now := t0.Add(40 * 24 * time.Hour)
	st := store.NewMem()
	cat := weeks(now)
	putAll(ctx, t, st, cat.Snapshots)
	clock := func() time.Time { return now }
	r := snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 2}
	honest, err := snapshot.GC(ctx, st, r, snapshot.GCOptions{DryRun: true, Now: clock})
	if err != nil || len(honest.Deleted) == 0 {
		t.Fatalf("retention plans %d deletions: %v", len(honest.Deleted), err)
	}
	// Two fulls under the newest names, without identity records.
	newest := cat.Fulls()[len(cat.Fulls())-1]
	var forged []snapshot.Snapshot
	for i := range 2 {
		s, err := snapshot.Parse(fmt.Sprintf("v2/Full-00000000-%08d-%d", 99990+i, newest.Created.Unix()+int64(i)+1))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, s.Key, strings.NewReader("not a database")); err != nil {
			t.Fatal(err)
		}
		forged = append(forged, s)
	}
	checked := &snapshot.CheckedFulls{}
	res, err := snapshot.GC(ctx, st, r, snapshot.GCOptions{DryRun: true, Now: clock, Checked: checked})
	if err != nil || keys(res.Deleted) != keys(honest.Deleted) || len(res.SetAside) != 2 {
		t.Fatalf("beside two forged fulls: planned %s (want %s), set aside %v: %v", keys(res.Deleted), keys(honest.Deleted), res.SetAside, err)
	}
	for i, a := range res.SetAside {
		if a.Snapshot.Key != forged[i].Key || !errors.Is(a.Why, snapshot.ErrNotABackup) {
			t.Fatalf("set aside %s: %v", a.Snapshot.Key, a.Why)
		}
	}
	// The store does not answer for one kept full: unknown deletes nothing.
	failing := failingGets{Store: st, key: newest.Key}
	if _, err := snapshot.GC(ctx, failing, r, snapshot.GCOptions{Now: clock}); err == nil || !strings.Contains(err.Error(), newest.Key) {
		t.Fatalf("GC with %s unreadable: %v", newest.Key, err)
	}
	// What was checked once is not read again.
	if _, err := snapshot.GC(ctx, failing, r, snapshot.GCOptions{DryRun: true, Now: clock, Checked: checked}); err != nil {
		t.Fatalf("GC with %s checked before: %v", newest.Key, err)
	}
}

// failingGets fails every read of key's identity record and content.
type failingGets struct {
	store.Store
	key string
}

func (f failingGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.Contains(key, strings.TrimPrefix(f.key, "v2/")) {
		return nil, fmt.Errorf("store mem://: get %s: connection refused", key)
	}
	return f.Store.Get(ctx, key)
}

// lockedStore refuses to delete the keys it locks, or every key with
// all, as a write-once bucket does (store.ErrLocked), until they are
// unlocked.
type lockedStore struct {
	store.Store
	locked map[string]bool
	all    bool
}

func (l lockedStore) Delete(ctx context.Context, key string) error {
	if l.all || l.locked[key] {
		return fmt.Errorf("store mem://: delete %s: %w", key, store.ErrLocked)
	}
	return l.Store.Delete(ctx, key)
}

// Retention on a bucket where some expired snapshots are locked: GC does
// not fail, keeps them and the deltas of a locked full's chain, asks again
// on each run, and deletes them once the lock ends.
func TestGCKeepsLockedSnapshots(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	now := t0.Add(40 * 24 * time.Hour)
	mem := store.NewMem()
	cat := weeks(now)
	putAll(ctx, t, mem, cat.Snapshots)
	clock := func() time.Time { return now }
	planned, err := snapshot.GC(ctx, mem, snapshot.Retention{}, snapshot.GCOptions{DryRun: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	// The newest expired full with expired deltas after it, and a lone
	// expired delta of an older chain.
	var lockedFull, lockedDelta snapshot.Snapshot
	for i, s := range planned.Deleted {
		if s.Kind == snapshot.KindFull && i+1 < len(planned.Deleted) && planned.Deleted[i+1].Kind == snapshot.KindDelta {
			lockedFull = s
		}
	}
	for _, s := range planned.Deleted {
		if s.Kind == snapshot.KindDelta {
			lockedDelta = s
			break
		}
	}
	if lockedDelta.LastRevision >= lockedFull.LastRevision {
		t.Fatalf("the oldest expired delta %s is not older than %s", lockedDelta.Key, lockedFull.Key)
	}
	st := lockedStore{Store: mem, locked: map[string]bool{lockedFull.Key: true, lockedDelta.Key: true}}
	for run := range 2 {
		res, err := snapshot.GC(ctx, st, snapshot.Retention{}, snapshot.GCOptions{Now: clock})
		if err != nil {
			t.Fatalf("run %d on a locked bucket: %v", run, err)
		}
		if got := keys(res.Locked); got != keys([]snapshot.Snapshot{lockedDelta, lockedFull}) {
			t.Fatalf("run %d: locked %s", run, got)
		}
		if run == 0 && (len(res.KeptForLock) == 0 || len(res.Deleted)+len(res.Locked)+len(res.KeptForLock) != len(planned.Deleted)) {
			t.Fatalf("run %d: deleted %d, locked %d, kept for the lock %d of %d expired", run, len(res.Deleted), len(res.Locked), len(res.KeptForLock), len(planned.Deleted))
		}
		for _, d := range res.KeptForLock {
			if d.Kind != snapshot.KindDelta || d.LastRevision <= lockedFull.LastRevision {
				t.Fatalf("kept %s for the locked full %s", d.Key, lockedFull.Key)
			}
		}
		if run == 1 && len(res.Deleted) != 0 {
			t.Fatalf("the second run deleted %s", keys(res.Deleted))
		}
	}
	// The locked full's chain is whole on the store.
	after, err := snapshot.List(ctx, mem)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := after.ContainingRevision(lockedFull.LastRevision + 1)
	if err != nil || chain.Full.Key != lockedFull.Key {
		t.Fatalf("the locked full's chain: %v, %v", chain.Full.Key, err)
	}
	if _, err := chain.Check(); err != nil {
		t.Fatalf("the locked full's chain is broken: %v", err)
	}
	clear(st.locked)
	res, err := snapshot.GC(ctx, st, snapshot.Retention{}, snapshot.GCOptions{Now: clock})
	if err != nil || len(res.Locked) != 0 || !slices.ContainsFunc(res.Deleted, func(s snapshot.Snapshot) bool { return s.Key == lockedFull.Key }) {
		t.Fatalf("once the locks end: deleted %s, locked %d, %v", keys(res.Deleted), len(res.Locked), err)
	}
}

// The probe says whether a store refuses deletes, and leaves at most one
// locked object behind, asked again next time.
func TestProbeProtection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	mem := store.NewMem()
	p, err := snapshot.ProbeProtection(ctx, mem)
	if err != nil || p.DeletesRefused {
		t.Fatalf("a store that deletes: %+v, %v", p, err)
	}
	if objs, _ := mem.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("an unlocked store keeps %d probes", len(objs))
	}
	locking := lockedStore{Store: mem, all: true}
	first, err := snapshot.ProbeProtection(ctx, locking)
	if err != nil || !first.DeletesRefused {
		t.Fatalf("a store that locks: %+v, %v", first, err)
	}
	again, err := snapshot.ProbeProtection(ctx, locking)
	if err != nil || !again.DeletesRefused || again.Probe != first.Probe {
		t.Fatalf("asked again: %+v, %v; want the first probe %s asked again", again, err, first.Probe)
	}
	if objs, _ := mem.List(ctx, ""); len(objs) != 1 {
		t.Fatalf("%d probes kept, want 1", len(objs))
	}
	// The lock ended: the old probe goes, and nothing locks the new one.
	p, err = snapshot.ProbeProtection(ctx, mem)
	if err != nil || p.DeletesRefused {
		t.Fatalf("once the lock ended: %+v, %v", p, err)
	}
	if objs, _ := mem.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("%d probes left once the lock ended", len(objs))
	}
}

// Retention keeps the newest drill records and the newest a sidecar
// verified against its cluster, whatever the drill period: a fleet's
// listing stays bounded, and a fleet drill keeps a digest to check.
func TestGCKeepsTheNewestDrillRecords(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var verified string
	for i := range 40 {
		r := snapshot.DrillRecord{At: at.Add(time.Duration(i) * time.Hour), Source: snapshot.DrillByFleet, Result: snapshot.DrillOK}
		if i == 2 {
			r.Source, r.Compared, r.SHA256 = snapshot.DrillBySidecar, true, "verified"
		}
		if i == 5 {
			r.Source, r.Result = snapshot.DrillBySidecar, snapshot.DrillFailed
		}
		key, err := snapshot.WriteDrill(ctx, st, r)
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			verified = key
		}
	}
	res, err := snapshot.GC(ctx, st, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1}, snapshot.GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "etcdkit/drills/")
	if err != nil {
		t.Fatal(err)
	}
	left := snapshot.DrillKeys(objs)
	if res.DrillsDeleted != 7 || len(left) != 33 || left[0] != verified {
		t.Fatalf("deleted %d, left %d records, the oldest %s; want 7, 33 and %s", res.DrillsDeleted, len(left), left[0], verified)
	}
	_, v, _, ok, err := snapshot.Drills(ctx, st)
	if err != nil || !ok || v.SHA256 != "verified" {
		t.Fatalf("the verified record after GC: %+v %v %v", v, ok, err)
	}
}
