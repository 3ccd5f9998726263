package capture

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// An uploader far behind the cluster writes a delta each period while it
// catches up, not one at the end: a store down meanwhile is noticed, and
// what it caught up is stored as it goes. Without a period it is one delta.
func TestACatchUpWritesADeltaEachPeriod(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := cli.Get(ctx, "none")
	if err != nil {
		t.Fatal(err)
	}
	since := first.Header.Revision
	// More revisions than etcd sends in one watch response from history
	// (1,000), so the catch-up takes several responses.
	var target int64
	for i := range 2500 {
		put, err := cli.Put(ctx, fmt.Sprintf("/registry/pods/p-%04d", i%300), "v")
		if err != nil {
			t.Fatal(err)
		}
		target = put.Header.Revision
	}
	drain := func(every time.Duration) []snapshot.Snapshot {
		st, err := store.NewFile(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		capt := newCapture(cli, st, since, DeltaOptions{})
		defer capt.stop()
		var written []snapshot.Snapshot
		if err := capt.drainTo(ctx, target, every, func(s snapshot.Snapshot, _ int) { written = append(written, s) }); err != nil {
			t.Fatal(err)
		}
		next := since + 1
		for _, s := range written {
			if s.StartRevision != next || s.LastRevision < s.StartRevision {
				t.Fatalf("deltas %v: %s does not continue at revision %d", written, s.Key, next)
			}
			next = s.LastRevision + 1
		}
		if next != target+1 {
			t.Fatalf("deltas %v end at %d, want %d", written, next-1, target)
		}
		return written
	}
	if got := drain(0); len(got) != 1 {
		t.Errorf("without a period: %d deltas, want 1", len(got))
	}
	// A period that has always passed: a delta after each watch response.
	if got := drain(time.Nanosecond); len(got) < 3 {
		t.Errorf("with a period: %d deltas, want one per watch response (at least 3)", len(got))
	}
}
