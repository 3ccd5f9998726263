package restore

import (
	"testing"
	"time"

	snap "github.com/etcdkit/etcdkit/snapshot"
)

func TestSafeBump(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	chain := snap.Chain{
		Full: snap.Snapshot{Kind: snap.KindFull, LastRevision: 1000, Created: at(0)},
		Deltas: []snap.Snapshot{
			{Kind: snap.KindDelta, StartRevision: 1001, LastRevision: 1200, Created: at(20)}, // 10/s
			{Kind: snap.KindDelta, StartRevision: 1201, LastRevision: 2200, Created: at(40)}, // 50/s, the peak
			{Kind: snap.KindDelta, StartRevision: 2201, LastRevision: 2400, Created: at(60)}, // 10/s
			{Kind: snap.KindDelta, StartRevision: 2401, LastRevision: 2401, Created: at(60)}, // within the same second
		},
	}
	for _, c := range []struct {
		name     string
		restored int64
		now      time.Time
		want     uint64
	}{
		// 50/s over 100 s, twice.
		{"latest, 100 s after the last delta", 2401, at(160), 10000},
		// The revisions past the target come on top.
		{"an older revision", 1401, at(160), 11000},
		// Right after the last delta: at least the minimum.
		{"at once", 2401, at(60), MinSafeBump},
		// A clock behind the names counts as no time.
		{"a clock behind", 2401, at(10), MinSafeBump},
	} {
		b := safeBump(chain, 0, c.restored, c.now)
		if b.Revisions != c.want {
			t.Errorf("%s: bump %d (rate %.0f/s, since %s), want %d", c.name, b.Revisions, b.Rate, b.Since, c.want)
		}
	}
	// A full alone has no rate: the minimum.
	if b := safeBump(snap.Chain{Full: chain.Full}, 0, 1000, at(3600)); b.Revisions != MinSafeBump || b.Newest != 1000 {
		t.Errorf("a full alone: %+v", b)
	}
}
