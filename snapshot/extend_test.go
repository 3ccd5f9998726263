package snapshot_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Extend copies the latest full to a new name with its identity; with
// GCFrom the earlier copies go, the full taken before hibernation stays,
// and a copy a lock keeps is reported.
func TestExtend(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	mem := store.NewMem()
	before := full(500, t0)
	for key, body := range map[string]string{
		full(100, t0.Add(-2*time.Hour)).Key:     "older full",
		delta(101, 500, t0.Add(-time.Hour)).Key: "its deltas",
		before.Key:                              "the full before hibernation",
	} {
		if err := mem.Put(ctx, key, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := snapshot.WriteIdentity(ctx, mem, before, snapshot.Identity{ClusterID: "c1", MemberIDs: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	st := lockedStore{Store: mem, locked: map[string]bool{}}
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }
	first, err := snapshot.Extend(ctx, st, snapshot.ExtendOptions{Now: at(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if first.From.Key != before.Key || first.To.LastRevision != 500 || !first.To.Created.Equal(t0.Add(24*time.Hour)) || first.OnServer {
		t.Fatalf("first extension: %+v", first)
	}
	rc, err := mem.Get(ctx, first.To.Key)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(got) != "the full before hibernation" {
		t.Fatalf("the copy holds %q", got)
	}
	id, ok, err := snapshot.ReadIdentity(ctx, mem, first.To)
	if err != nil || !ok || id.ClusterID != "c1" || id.Snapshot != first.To.Key {
		t.Fatalf("the copy's identity: %+v %v %v", id, ok, err)
	}
	cat, err := snapshot.List(ctx, mem)
	if err != nil {
		t.Fatal(err)
	}
	if latest, err := cat.Latest(); err != nil || latest.Full.Key != first.To.Key {
		t.Fatalf("the latest chain starts at %s (%v), want the copy", latest.Full.Key, err)
	}

	// The task began an hour before the first extension; the second
	// deletes the first copy and never the full before it.
	task := t0.Add(23 * time.Hour)
	second, err := snapshot.Extend(ctx, st, snapshot.ExtendOptions{Now: at(48 * time.Hour), GCFrom: task})
	if err != nil {
		t.Fatal(err)
	}
	if second.From.Key != first.To.Key || len(second.Deleted) != 1 || second.Deleted[0].Key != first.To.Key {
		t.Fatalf("second extension: from %s, deleted %v", second.From.Key, keys(second.Deleted))
	}
	if _, err := mem.Get(ctx, before.Key); err != nil {
		t.Fatalf("the full before hibernation: %v", err)
	}
	st.locked[second.To.Key] = true
	third, err := snapshot.Extend(ctx, st, snapshot.ExtendOptions{Now: at(72 * time.Hour), GCFrom: task})
	if err != nil || len(third.Locked) != 1 || third.Locked[0].Key != second.To.Key || len(third.Deleted) != 0 {
		t.Fatalf("third extension, the second copy locked: locked %v, deleted %v, %v", keys(third.Locked), keys(third.Deleted), err)
	}
	// A task time given wrong (0: the epoch) deletes the copies, and
	// still not the full the cluster took.
	fourth, err := snapshot.Extend(ctx, st, snapshot.ExtendOptions{Now: at(96 * time.Hour), GCFrom: time.Unix(0, 0)})
	if err != nil || len(fourth.Deleted) != 1 || fourth.Deleted[0].Key != third.To.Key {
		t.Fatalf("fourth extension from the epoch: deleted %v, locked %v, %v", keys(fourth.Deleted), keys(fourth.Locked), err)
	}
	if _, err := mem.Get(ctx, before.Key); err != nil {
		t.Fatalf("the full before hibernation, after an extension from the epoch: %v", err)
	}
}
