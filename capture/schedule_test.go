package capture_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Full snapshots come when their cron schedule says, and at start when the
// schedule's last time passed while nothing ran; not when it did not.
func TestFullSchedule(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{TLS: true})
	cli := c.Client(t)
	ctx := context.Background()
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := &etcdtest.Clock{}
	hour := func(h, m, s int) time.Time { return time.Date(2026, 12, 1, h, m, s, 0, time.UTC) }
	opts := capture.Options{FullSchedule: "0 * * * *", DeltaPeriod: 50 * time.Millisecond, Now: clock.Now}
	put := func(n int) {
		for i := range n {
			if _, err := cli.Put(ctx, fmt.Sprintf("/schedule/%d", i), clock.Now().String()); err != nil {
				t.Fatal(err)
			}
		}
	}

	// 10:59:59: no full yet, one at start; then the schedule's, at 11:00.
	clock.Set(hour(10, 59, 59))
	r := start(t, cli, st, opts)
	if first := r.Await(t, capture.OpFull); first.Reason != "no full snapshot" {
		t.Fatalf("the first full's reason: %q", first.Reason)
	}
	put(10)
	scheduled := r.Await(t, capture.OpFull)
	if scheduled.Reason != "schedule" || scheduled.Snapshot.Created.Before(hour(11, 0, 0)) || scheduled.Snapshot.Created.After(hour(11, 0, 2)) {
		t.Fatalf("the scheduled full: %q, created %s; want schedule, at 11:00", scheduled.Reason, scheduled.Snapshot.Created)
	}
	r.Stop(t)

	// 11:40: the 11:00 full is the schedule's latest; a delta continues it.
	put(10)
	clock.Set(hour(11, 40, 0))
	r = start(t, cli, st, opts)
	if d := r.Await(t, capture.OpDelta); d.Reason != "startup" {
		t.Fatalf("the first delta at 11:40: %q", d.Reason)
	}
	r.Stop(t)
	if fulls := r.Written(capture.OpFull); len(fulls) != 0 {
		t.Fatalf("a full at 11:40 (%s), within the schedule", fulls[0].Reason)
	}

	// 13:05: nothing ran at 12:00 or 13:00: a full at once.
	put(10)
	clock.Set(hour(13, 5, 0))
	r = start(t, cli, st, opts)
	if missed := r.Await(t, capture.OpFull); missed.Reason != "schedule missed" || missed.Snapshot.Created.Before(hour(13, 5, 0)) {
		t.Fatalf("the full at 13:05: %q, created %s; want schedule missed", missed.Reason, missed.Snapshot.Created)
	}
	r.Stop(t)
	checkChain(t, cli, st, snapshot.Codec{})
}
