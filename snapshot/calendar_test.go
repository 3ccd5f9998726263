package snapshot_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the simulated year is counted in Berlin's time, DST included

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// The simulated year's objects: sizes, and deltas per full.
const fullSize, deltaSize, deltasPerFull = 1000, 50, 4

// A simulated year of backups, driven by a clock (no sleeping): a full
// at seven past each hour with four deltas after it, through both of
// Berlin's DST changes, a ten-day outage, a fortnight of fulls every
// twenty minutes and ISO week 2026-W53, with GC after every sixth full
// and before each check. At the end of each month the store holds
// exactly the fulls the Calendar rules promise, computed here from every
// full ever taken; each kept full names exactly the rules that keep it,
// and its chain is whole.
func TestCalendarRetentionOverAYear(t *testing.T) {
	ctx := t.Context()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	r := snapshot.Retention{Policy: snapshot.Calendar, Hourly: 12, Daily: 7, Weekly: 5, Monthly: 12, Yearly: 3,
		MaxAge: 5 * time.Hour, MaxSize: 16*(fullSize+deltasPerFull*deltaSize) + 10, Location: berlin}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	st := store.NewMem()
	checked := &snapshot.CheckedFulls{}
	var taken []snapshot.Snapshot  // every full ever taken, oldest first
	chain := map[string][]string{} // a full's deltas
	rev := int64(1)
	start, end := time.Date(2025, 11, 20, 0, 7, 0, 0, time.UTC), time.Date(2027, 1, 3, 0, 0, 0, 0, time.UTC)
	outage := [2]time.Time{time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 20, 0, 0, 0, 0, time.UTC)}
	burst := [2]time.Time{time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 15, 0, 0, 0, 0, time.UTC)}
	month := start.Month()
	checks, steps := 0, 0
	for now := start; now.Before(end); {
		step := time.Hour
		if !now.Before(burst[0]) && now.Before(burst[1]) {
			step = 20 * time.Minute
		}
		if now.Before(outage[0]) || !now.Before(outage[1]) {
			f := putSized(ctx, t, st, fmt.Sprintf("v2/Full-00000000-%08d-%d", rev, now.Unix()), fullSize)
			if err := snapshot.WriteIdentity(ctx, st, f, snapshot.Identity{ClusterID: "1"}); err != nil {
				t.Fatal(err)
			}
			taken = append(taken, f)
			for i := range deltasPerFull {
				at := now.Add(time.Duration(i+1) * step / (deltasPerFull + 1))
				d := putSized(ctx, t, st, fmt.Sprintf("v2/Incr-%08d-%08d-%d", rev+1, rev+10, at.Unix()), deltaSize)
				chain[f.Key] = append(chain[f.Key], d.Key)
				rev += 10
			}
			rev++
		}
		now = now.Add(step)
		steps++
		// GC every sixth step, as a sidecar whose retention runs less
		// often than its fulls, and before each month's check: what a
		// rule keeps does not depend on when GC ran.
		m := now.In(berlin).Month()
		check := m != month || !now.Before(end)
		if steps%6 != 0 && !check {
			continue
		}
		res, err := snapshot.GC(ctx, st, r, snapshot.GCOptions{Now: func() time.Time { return now }, Checked: checked})
		if err != nil {
			t.Fatal(err)
		}
		if check {
			month = m
			checks++
			checkCalendar(t, ctx, st, r, res, taken, chain, now)
		}
	}
	if checks < 13 {
		t.Fatalf("%d monthly checks, want 13 or more", checks)
	}
}

func putSized(ctx context.Context, t *testing.T, st store.Store, key string, size int) snapshot.Snapshot {
	t.Helper()
	if err := st.Put(ctx, key, strings.NewReader(strings.Repeat("x", size))); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Parse(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkCalendar compares what st holds with what each of r's rules
// promises of taken at now, computed from the rules' words alone.
func checkCalendar(t *testing.T, ctx context.Context, st store.Store, r snapshot.Retention, res snapshot.GCResult, taken []snapshot.Snapshot, chain map[string][]string, now time.Time) {
	t.Helper()
	want := map[string][]string{taken[len(taken)-1].Key: {"newest chain"}}
	// The newest full of each of the newest n periods holding one.
	periods := func(name string, n int, of func(time.Time) time.Time, format string) {
		newest := map[time.Time]snapshot.Snapshot{}
		for _, f := range taken { // oldest first: the last one stays
			newest[of(f.Created.In(r.Location))] = f
		}
		starts := slices.SortedFunc(maps.Keys(newest), func(a, b time.Time) int { return b.Compare(a) })
		for _, p := range starts[:min(n, len(starts))] {
			label := p.Format(format)
			if name == "weekly" {
				y, w := p.ISOWeek()
				label = fmt.Sprintf("%d-W%02d", y, w)
			}
			f := newest[p]
			want[f.Key] = append(want[f.Key], name+" "+label)
		}
	}
	loc := r.Location
	periods("hourly", r.Hourly, func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, loc) }, "2006-01-02T15")
	periods("daily", r.Daily, func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc) }, "2006-01-02")
	periods("weekly", r.Weekly, func(t time.Time) time.Time {
		monday := (int(t.Weekday()) + 6) % 7 // days since Monday
		return time.Date(t.Year(), t.Month(), t.Day()-monday, 0, 0, 0, 0, loc)
	}, "")
	periods("monthly", r.Monthly, func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc) }, "2006-01")
	periods("yearly", r.Yearly, func(t time.Time) time.Time { return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, loc) }, "2006")
	for _, f := range taken {
		if now.Sub(f.Created) <= r.MaxAge {
			want[f.Key] = append(want[f.Key], "max-age "+r.MaxAge.String())
		}
	}
	// The newest chains that fit in MaxSize: each full with its deltas.
	total := int64(0)
	for i := len(taken) - 1; i >= 0; i-- {
		if total += int64(fullSize + len(chain[taken[i].Key])*deltaSize); total > r.MaxSize {
			break
		}
		want[taken[i].Key] = append(want[taken[i].Key], "max-size")
	}

	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range cat.Snapshots {
		have[s.Key] = true
	}
	for _, f := range taken {
		_, wanted := want[f.Key]
		if have[f.Key] != wanted {
			t.Fatalf("at %s: %s (taken %s) held %v, promised %v by %q", now.In(loc), f.Key, f.Created.In(loc), have[f.Key], wanted, want[f.Key])
		}
		// A kept full's chain is whole; an expired one's is gone.
		for _, d := range chain[f.Key] {
			if have[d] != wanted {
				t.Fatalf("at %s: delta %s of %s held %v, its full kept %v", now.In(loc), d, f.Key, have[d], wanted)
			}
		}
	}
	// Each kept full names exactly the rules that keep it.
	for _, k := range res.Kept {
		if k.Snapshot.Kind != snapshot.KindFull {
			if len(k.Rules) != 1 || !strings.HasPrefix(k.Rules[0], "chain of v2/Full-") {
				t.Fatalf("delta %s kept for %q", k.Snapshot.Key, k.Rules)
			}
			continue
		}
		got, exp := slices.Sorted(slices.Values(k.Rules)), slices.Sorted(slices.Values(want[k.Snapshot.Key]))
		if !slices.Equal(got, exp) {
			t.Fatalf("at %s: %s kept for %q, want %q", now.In(loc), k.Snapshot.Key, got, exp)
		}
	}
}
