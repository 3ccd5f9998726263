package restore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// history is a chain on a file store: a full, then deltas to its end,
// taken by a snapshotter of a cluster that is then stopped (the cluster
// an incident took).
type forkHistory struct {
	st       store.Store
	mid, end int64
	head     history.Digest
	// The stopped member's name, peer URL and token: a restore with them
	// builds a cluster of the same ID, as one of etcd-druid's would.
	name, token string
	peer        url.URL
}

// uploadWhile runs a Snapshotter of cli on st while write writes, from
// the chain's first full (a restore to the middle reads it) until the
// chain reaches the revision write returns, and stops it.
func uploadWhile(t *testing.T, cli *clientv3.Client, st store.Store, write func() int64) {
	t.Helper()
	s, err := capture.New(cli, st, capture.Options{DeltaPeriod: 50 * time.Millisecond, FullSchedule: "@every 1h", RetentionPeriod: capture.Off, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	etcdtest.Eventually(t, "the first full snapshot", 30*time.Second, func() bool { return s.Status().LastFull.Key != "" })
	end := write()
	etcdtest.Eventually(t, "the chain reaches the cluster's end", 30*time.Second, func() bool { return s.Status().LastRevision >= end })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func chainOfStoppedCluster(t *testing.T) forkHistory {
	t.Helper()
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Keys before the chain's full, so its identity records some.
	if _, err := (etcdtest.Workload{Ops: 20, Prefix: "/old/", Seed: 30}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	s, err := capture.New(cli, st, capture.Options{DeltaPeriod: 50 * time.Millisecond, FullSchedule: "@every 1h", RetentionPeriod: capture.Off, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	// The chain's full before the writes, so the middle has one below it.
	etcdtest.Eventually(t, "the first full snapshot", 30*time.Second, func() bool { return s.Status().LastFull.Key != "" })
	h := forkHistory{st: st}
	res, err := (etcdtest.Workload{Ops: 120, Prefix: "/old/", Seed: 31}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	h.mid = res.LastRevision
	if res, err = (etcdtest.Workload{Ops: 120, Prefix: "/old/", Seed: 32}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	h.end = res.LastRevision
	etcdtest.Eventually(t, "the chain reaches the cluster's end", 30*time.Second, func() bool { return s.Status().LastRevision >= h.end })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h.head, err = history.LiveDigest(ctx, cli, h.end); err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	h.name, h.peer, h.token = m.Name, m.PeerURL, "etcdtest"
	c.Close()
	return h
}

// restored restores the store into a new member and starts it: a new
// cluster, unless o names the old member and its token.
func restored(t *testing.T, st store.Store, o restore.Options) (*etcdtest.Cluster, restore.Result) {
	t.Helper()
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	if o.Member.Name == "" {
		o.Member.Name, o.Member.PeerURLs = "restored", []string{peer.String()}
	}
	u, err := url.Parse(o.Member.PeerURLs[0])
	if err != nil {
		t.Fatal(err)
	}
	o.Member.DataDir = filepath.Join(t.TempDir(), "data")
	res, err := restore.Restore(context.Background(), st, o)
	if err != nil {
		t.Fatal(err)
	}
	return etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true}, o.Member.Name, o.Member.DataDir, *u), res
}

// A cluster restored to the middle of its chain lives another past from
// there: its sidecar begins a timeline that says where it forked, writes
// a chain of its own, and never appends to the old one, whatever its
// revision reaches. The newest timeline restores to the new cluster's
// state; the old one still restores exactly to the old cluster's end.
func TestRestoreToTheMiddleForks(t *testing.T) {
	ctx := context.Background()
	h := chainOfStoppedCluster(t)
	c, res := restored(t, h.st, restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: h.mid}}})
	if res.Revision != h.mid {
		t.Fatalf("restored revision %d, want %d", res.Revision, h.mid)
	}
	cli := c.Client(t)
	s, err := capture.New(cli, h.st, capture.Options{DeltaPeriod: 50 * time.Millisecond, FullSchedule: "@every 1h", RetentionPeriod: capture.Off, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	// Past the old chain's end: the new past's revisions overlap the old.
	load, err := (etcdtest.Workload{Ops: int(h.end-h.mid) + 40, Prefix: "/new/", Seed: 33}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if load.LastRevision <= h.end {
		t.Fatalf("the new cluster reached %d, not past the old end %d", load.LastRevision, h.end)
	}
	etcdtest.Eventually(t, "the new chain reaches the new cluster's end", 30*time.Second, func() bool { return s.Status().LastRevision >= load.LastRevision })
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	cat, err := snapshot.List(ctx, h.st)
	if err != nil {
		t.Fatal(err)
	}
	tl := cat.Timeline
	if tl.ID == snapshot.FirstTimeline || tl.Parent != snapshot.FirstTimeline || tl.ForkRevision != h.mid || !strings.Contains(tl.Reason, "restored from") {
		t.Fatalf("the new cluster's timeline: %+v", tl)
	}
	latest, err := cat.Latest()
	if err != nil || latest.Timeline != tl.ID || latest.Full.LastRevision < h.mid {
		t.Fatalf("the newest chain: %+v %v", latest, err)
	}
	first, err := cat.On(snapshot.FirstTimeline)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range first.Own() {
		if o.LastRevision > h.end {
			t.Fatalf("the old timeline grew past its end %d: %s", h.end, o.Key)
		}
	}
	want, err := history.LiveDigest(ctx, cli, load.LastRevision)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		target restore.Target
		rev    int64
		want   history.Digest
	}{
		{"the newest timeline's head", restore.Target{}, load.LastRevision, want},
		{"the old timeline's head", restore.Target{Timeline: snapshot.FirstTimeline}, h.end, h.head},
	} {
		rep, err := history.Verify(ctx, h.st, history.VerifyOptions{Read: restore.ReadOptions{Target: tc.target}, WorkDir: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.Chain.LastRevision() != tc.rev || rep.Digest != tc.want {
			t.Fatalf("%s: revision %d sums to %v, want %d and %v", tc.name, rep.Chain.LastRevision(), rep.Digest, tc.rev, tc.want)
		}
	}
	// The shared past reads through the new timeline.
	if ch, err := restore.Chain(ctx, h.st, restore.Target{Revision: h.mid - 10}); err != nil || ch.Timeline != snapshot.FirstTimeline {
		t.Fatalf("the shared past, from the newest timeline: %+v %v", ch, err)
	}
}

// A restore to the chain's end continues it (the revision bump of an
// automated restore too): its sidecar goes on in the same timeline.
// Restored to the middle without a record of it (as etcdutl or
// etcd-backup-restore restore), the cluster forks all the same: below the
// chain's end, or past it with other keys there.
func TestRestoreContinuesOnlyFromTheEnd(t *testing.T) {
	ctx := context.Background()
	h := chainOfStoppedCluster(t)
	place := func(t *testing.T, cli *clientv3.Client) capture.Lineage {
		t.Helper()
		l, _, err := capture.Place(ctx, cli, h.st, capture.PlaceOptions{DryRun: true, SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(l.Reason)
		return l
	}
	t.Run("the end, bumped", func(t *testing.T) {
		c, _ := restored(t, h.st, restore.Options{SafeRevision: true})
		if l := place(t, c.Client(t)); !l.Continues || l.Timeline.ID != snapshot.FirstTimeline {
			t.Fatalf("a restore of the end: %+v", l)
		}
	})
	// etcdutl restores with the old configuration and keeps the revision:
	// the cluster's ID is the old one's, and the store has no word of the
	// restore.
	same := func(o restore.Options) restore.Options {
		o.Member.Name, o.Member.PeerURLs, o.Member.Token = h.name, []string{h.peer.String()}, h.token
		o.KeepRevision = true
		return o
	}
	forget := func(t *testing.T) {
		t.Helper()
		objs, err := h.st.List(ctx, "etcdkit/restores/")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := h.st.Delete(ctx, o.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("the end, unrecorded", func(t *testing.T) {
		c, _ := restored(t, h.st, same(restore.Options{}))
		forget(t)
		if l := place(t, c.Client(t)); !l.Continues {
			t.Fatalf("an unrecorded restore of the end, its keys the chain's: %+v", l)
		}
	})
	t.Run("the middle, unrecorded, below the end", func(t *testing.T) {
		c, _ := restored(t, h.st, same(restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: h.mid}}}))
		forget(t)
		if l := place(t, c.Client(t)); l.Continues || !strings.Contains(l.Reason, "below the end") {
			t.Fatalf("an unrecorded restore to the middle: %+v", l)
		}
	})
	t.Run("the middle, unrecorded, past the end", func(t *testing.T) {
		c, _ := restored(t, h.st, same(restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: h.mid}}}))
		forget(t)
		cli := c.Client(t)
		if _, err := (etcdtest.Workload{Ops: int(h.end-h.mid) + 5, Prefix: "/new/", Seed: 34}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		if l := place(t, cli); l.Continues || !strings.Contains(l.Reason, "differ") {
			t.Fatalf("an unrecorded restore to the middle, written past the end: %+v", l)
		}
	})
	// Rolled back one revision, the cluster writes again what the chain's
	// last revision wrote, and a key beside it in the same transaction:
	// the keys the chain wrote agree, the revision does not. With the
	// record of its restore (below the end) and without.
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprintf("the end written again beside another key, recorded %v", recorded), func(t *testing.T) {
			c, _ := restored(t, h.st, same(restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: h.end - 1}}}))
			if !recorded {
				forget(t)
			}
			cli := c.Client(t)
			ops := []clientv3.Op{clientv3.OpPut("/extra", "not the chain's")}
			for _, e := range eventsAt(t, h.st, h.end) {
				if e.Type == snapshot.Delete {
					ops = append(ops, clientv3.OpDelete(string(e.Kv.Key)))
				} else {
					ops = append(ops, clientv3.OpPut(string(e.Kv.Key), string(e.Kv.Value)))
				}
			}
			resp, err := cli.Txn(ctx).Then(ops...).Commit()
			if err != nil || resp.Header.Revision != h.end {
				t.Fatalf("the txn: %v at revision %d, want %d", err, resp.Header.Revision, h.end)
			}
			if l := place(t, cli); l.Continues {
				t.Fatalf("a cluster whose revision %d wrote a key the chain's did not: %+v", h.end, l)
			}
		})
	}
	// The cluster above, and then a restore of the end with the same
	// configuration into a directory nothing runs from: the record names
	// the cluster's ID and the chain's end, and the cluster's keys
	// contradict it.
	t.Run("the middle, past the end, beside a record of the end", func(t *testing.T) {
		c, _ := restored(t, h.st, same(restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: h.mid}}}))
		forget(t)
		cli := c.Client(t)
		if _, err := (etcdtest.Workload{Ops: int(h.end-h.mid) + 5, Prefix: "/new/", Seed: 34}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		o := same(restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "drill")}})
		if _, err := restore.Restore(ctx, h.st, o); err != nil {
			t.Fatal(err)
		}
		if l := place(t, cli); l.Continues || !strings.Contains(l.Reason, "differ") {
			t.Fatalf("a cluster whose keys differ from the chain's end, beside a record of a restore of the end: %+v", l)
		}
	})
}

// Two deployments of one configuration (the same names, peer URLs and
// token) are two clusters of one ID. Pointed at the other's backups, the
// twin's keys agree with the chain at no revision compared: it is another
// cluster's chain, refused, below the chain's end and past it; the chain
// stays the first cluster's, and its sidecar writes on.
func TestATwinDeploymentIsAnotherCluster(t *testing.T) {
	ctx := context.Background()
	h := chainOfStoppedCluster(t)
	twin := etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true}, h.name, filepath.Join(t.TempDir(), "twin"), h.peer)
	cli := twin.Client(t)
	for _, n := range []int{20, int(h.end)} {
		if _, err := (etcdtest.Workload{Ops: n, Prefix: "/twin/", Seed: 35}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		_, _, err := capture.Place(ctx, cli, h.st, capture.PlaceOptions{SpoolDir: t.TempDir()})
		if !errors.Is(err, snapshot.ErrOtherCluster) {
			t.Fatalf("the twin, after %d more writes: %v, want another cluster's chain", n, err)
		}
		t.Log(err)
	}
	if cat, err := snapshot.List(ctx, h.st); err != nil || len(cat.Timelines) != 1 {
		t.Fatalf("the twin began a timeline: %+v %v", cat.Timelines, err)
	}
}

// snapshotterBeside starts a member and a Snapshotter of it on a file
// store, stopped when the test ends.
func snapshotterBeside(t *testing.T) (*etcdtest.Cluster, *clientv3.Client, store.Store, *capture.Snapshotter) {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st, err := store.Open(t.Context(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := capture.New(cli, st, capture.Options{DeltaPeriod: 50 * time.Millisecond, FullSchedule: "@every 1h", RetentionPeriod: capture.Off,
		SpoolDir: t.TempDir(), MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("snapshotter: %v", err)
		}
	})
	return c, cli, st, s
}

// The sidecar runs on while its member is restored in place, to an
// earlier revision (the etcd container restarted on the restored data
// dir). Its watch resumes on the restored member and receives the new
// past's events: none of them reaches the old timeline. The member's raft
// log went back, so the uploader drops what it holds and places its
// backups again: a new timeline forked at the restore's revision.
func TestInPlaceRestoreUnderARunningSidecar(t *testing.T) {
	ctx := context.Background()
	c, cli, st, s := snapshotterBeside(t)
	// The restore below reaches back to the middle of the writes: the
	// chain must begin before them.
	etcdtest.Eventually(t, "the first full snapshot", 30*time.Second, func() bool { return s.Status().LastFull.Key != "" })
	res, err := (etcdtest.Workload{Ops: 150, Prefix: "/a/", Seed: 36}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	mid := res.LastRevision
	if res, err = (etcdtest.Workload{Ops: 60, Prefix: "/b/", Seed: 37}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	end := res.LastRevision
	etcdtest.Eventually(t, "the chain reaches the end", 30*time.Second, func() bool { return s.Status().LastRevision >= end })
	m := c.Members[0]
	m.Stop()
	if _, err := restore.Restore(ctx, st, restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: mid}}, Member: member.Spec{DataDir: m.Dir, Name: m.Name, PeerURLs: []string{m.PeerURL.String()}, Token: "etcdtest"}, KeepMovedAside: -1}); err != nil {
		t.Fatal(err)
	}
	m.Restart(t)
	if res, err = (etcdtest.Workload{Ops: int(end-mid) + 40, Prefix: "/new/", Seed: 38}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	last := res.LastRevision
	var cat snapshot.Catalog
	etcdtest.Eventually(t, "a new timeline reaches the restored member's end", 60*time.Second, func() bool {
		if cat, err = snapshot.List(ctx, st); err != nil || cat.Timeline.ID == snapshot.FirstTimeline {
			return false
		}
		ch, err := cat.Latest()
		return err == nil && ch.Timeline == cat.Timeline.ID && ch.LastRevision() >= last
	})
	if cat.Timeline.ForkRevision != mid {
		t.Fatalf("the new timeline: %+v, want forked at %d", cat.Timeline, mid)
	}
	first, err := cat.On(snapshot.FirstTimeline)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range first.Own() {
		if o.LastRevision > end {
			t.Fatalf("the old timeline holds %s, past its end %d: the new past's events", o.Key, end)
		}
	}
	want, err := history.LiveDigest(ctx, cli, last)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := history.Verify(ctx, st, history.VerifyOptions{WorkDir: t.TempDir()})
	if err != nil || rep.Digest != want {
		t.Fatalf("the new timeline's head %v (%v), the live member %v", rep.Digest, err, want)
	}
}

// A restore of the running cluster into a directory nothing runs from (a
// drill, a look at yesterday) records a restore of the cluster's ID, to
// the chain's end and to its middle. The record neither stops the
// cluster's uploader nor makes its next start fork a timeline: the
// cluster's own keys show it lived the chain to its end.
func TestARestoreNothingRunsFromChangesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, cli, st, s := snapshotterBeside(t)
	etcdtest.Eventually(t, "the first full snapshot", 30*time.Second, func() bool { return s.Status().LastFull.Key != "" })
	res, err := (etcdtest.Workload{Ops: 60, Prefix: "/a/", Seed: 37}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	mid := res.LastRevision
	if res, err = (etcdtest.Workload{Ops: 60, Prefix: "/a/", Seed: 38}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the chain reaches the writes", 30*time.Second, func() bool { return s.Status().LastRevision >= res.LastRevision })
	m := c.Members[0]
	for _, target := range []restore.Target{{}, {Revision: mid}} {
		// The member's own name, peer URL and token: the cluster ID of
		// the restore is the running cluster's.
		if _, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "drill"), Name: m.Name, PeerURLs: []string{m.PeerURL.String()}, Token: "etcdtest"}, Read: restore.ReadOptions{Target: target}}); err != nil {
			t.Fatal(err)
		}
		after, err := cli.Put(ctx, "/after-a-drill", fmt.Sprint(target.Revision))
		if err != nil {
			t.Fatal(err)
		}
		etcdtest.Eventually(t, "the uploader writes on", 30*time.Second, func() bool {
			return s.Status().LastRevision >= after.Header.Revision || s.Status().Refused != ""
		})
		if r := s.Status().Refused; r != "" {
			t.Fatalf("a restore nothing runs from stopped the uploader: %s (%s)", r, s.Status().LastError)
		}
		l, _, err := capture.Place(ctx, cli, st, capture.PlaceOptions{DryRun: true, SpoolDir: t.TempDir()})
		if err != nil || !l.Continues || l.Timeline.ID != snapshot.FirstTimeline {
			t.Fatalf("the cluster's next start, after a restore to revision %d nothing runs from: %+v %v", target.Revision, l, err)
		}
		t.Log(l.Reason)
	}
}

// A chain whose newest delta holds only deletes (a Kubernetes cluster's
// events, expired with their lease, while nothing else was written) ends
// in keys that exist nowhere: the sidecar that starts next must still see
// its cluster's past there, by the deletes themselves, and go on in the
// same timeline rather than fork it.
func TestADeltaOfDeletesAloneContinues(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, cli, st, s := snapshotterBeside(t)
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/events/%02d", i), "an event", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Put(ctx, "/pods/a", "a pod")
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the puts are backed up", 30*time.Second, func() bool { return s.Status().LastRevision >= resp.Header.Revision })
	rv, err := cli.Revoke(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the deletes are backed up", 30*time.Second, func() bool { return s.Status().LastRevision >= rv.Header.Revision })
	chain := chaintest.Latest(t, st)
	if last := chain.Deltas[len(chain.Deltas)-1]; last.StartRevision != rv.Header.Revision {
		t.Fatalf("the newest delta %s holds more than the revoke's deletes (revision %d)", last.Key, rv.Header.Revision)
	}
	l, _, err := capture.Place(ctx, cli, st, capture.PlaceOptions{DryRun: true, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Continues || !strings.Contains(l.Reason, fmt.Sprint(rv.Header.Revision)) {
		t.Fatalf("after a delta of deletes alone: %+v, want the timeline continued at revision %d", l, rv.Header.Revision)
	}
}

// eventsAt are the events the store's newest chain holds of revision rev.
func eventsAt(t *testing.T, st store.Store, rev int64) []*snapshot.WatchEvent {
	t.Helper()
	ctx := context.Background()
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := cat.Latest()
	if err != nil || len(ch.Deltas) == 0 {
		t.Fatalf("the newest chain: %+v %v", ch, err)
	}
	dr, err := snapshot.OpenDelta(ctx, st, ch.Deltas[len(ch.Deltas)-1], snapshot.Codec{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dr.Close() }()
	var out []*snapshot.WatchEvent
	for {
		ev, err := dr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e := ev.EtcdEvent; e != nil && e.Kv != nil && e.Kv.ModRevision == rev {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no event of revision %d in the newest delta", rev)
	}
	return out
}

// Reads pick the first site unless its newest chain cannot be read whole,
// then the second when its chain is whole; with neither whole, the first,
// whose error the read reports.
func TestSite(t *testing.T) {
	ctx := context.Background()
	h := chainOfStoppedCluster(t)
	open := func() store.Store {
		st, err := store.Open(ctx, "file://"+t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	empty, broken := open(), open()
	if _, err := snapshot.Copy(ctx, h.st, broken, snapshot.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	cat, err := snapshot.List(ctx, broken)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := cat.Latest()
	if err != nil || len(ch.Deltas) == 0 {
		t.Fatalf("the copy's chain: %+v %v", ch, err)
	}
	if err := broken.Delete(ctx, ch.Full.Key); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		first, second store.Store
		want          store.Store
	}{
		{"a whole first site", h.st, empty, h.st},
		{"an empty first site", empty, h.st, h.st},
		{"a first site without its full snapshot", broken, h.st, h.st},
		{"no whole site", broken, empty, broken},
		{"no second site", empty, nil, empty},
	} {
		if got := restore.Site(ctx, tc.first, restore.ReadOptions{Secondary: tc.second}); got != tc.want {
			t.Errorf("%s: picked %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A cluster that went on in its chain and compacted its history: the
// chain's last revisions cannot be watched any more, and the keys alone
// say it continues; its next start stays in the timeline.
func TestACompactedClusterContinues(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, cli, st, s := snapshotterBeside(t)
	etcdtest.Eventually(t, "the first full snapshot", 30*time.Second, func() bool { return s.Status().LastFull.Key != "" })
	res, err := (etcdtest.Workload{Ops: 80, Prefix: "/c/", Seed: 39}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the chain reaches the writes", 30*time.Second, func() bool { return s.Status().LastRevision >= res.LastRevision })
	if _, err := cli.Compact(ctx, res.LastRevision); err != nil {
		t.Fatal(err)
	}
	l, _, err := capture.Place(ctx, cli, st, capture.PlaceOptions{DryRun: true, SpoolDir: t.TempDir()})
	if err != nil || !l.Continues || l.Timeline.ID != snapshot.FirstTimeline {
		t.Fatalf("a compacted cluster's next start: %+v %v", l, err)
	}
	t.Log(l.Reason)
}

// A full whose bytes are damaged on the first site, whole on the second:
// names cannot show it, so the first site is picked, and the restore reads
// the second site's copy instead of failing; without a second site it
// fails as damaged.
func TestRestoreReadsTheOtherSiteWhenDamaged(t *testing.T) {
	ctx := context.Background()
	h := chainOfStoppedCluster(t)
	second, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Copy(ctx, h.st, second, snapshot.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	cat, err := snapshot.List(ctx, h.st)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := cat.Latest()
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, h.st, ch.Full.Key, func(b []byte) []byte { b[len(b)/3] ^= 0x08; return b })
	site := restore.Site(ctx, h.st, restore.ReadOptions{Secondary: second})
	if site != h.st {
		t.Fatalf("picked %v: the damage is in no name, the first site should be picked", site)
	}
	var logs bytes.Buffer
	opts := restore.Options{Read: restore.ReadOptions{Secondary: second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}}
	res, err := restore.Restore(ctx, h.st, opts)
	if err != nil || res.Revision != h.end {
		t.Fatalf("restore from two sites, the first damaged: %+v, %v; want revision %d", res, err, h.end)
	}
	if !strings.Contains(logs.String(), "restoring from the other site's copies") {
		t.Fatalf("the fallback is not logged: %s", logs.String())
	}
	_, err = restore.Restore(ctx, h.st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "alone")}})
	if !restore.Damaged(err) {
		t.Fatalf("restore from the damaged site alone: %v, want damaged", err)
	}
	// A second site that lags (its copy of the newest delta not made yet)
	// gives no older state in silence: the restore fails, and builds
	// nothing.
	lagging, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Copy(ctx, second, lagging, snapshot.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	last := ch.Deltas[len(ch.Deltas)-1]
	if err := lagging.Delete(ctx, last.Key); err != nil {
		t.Fatal(err)
	}
	fresh, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Copy(ctx, second, fresh, snapshot.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	rewrite(t, fresh, last.Key, func(b []byte) []byte { b[len(b)/2] ^= 0x08; return b })
	dir := filepath.Join(t.TempDir(), "lagging")
	res, err = restore.Restore(ctx, fresh, restore.Options{Read: restore.ReadOptions{Secondary: lagging}, Member: member.Spec{DataDir: dir}})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(last.LastRevision)) {
		t.Fatalf("restore from a damaged newest delta and a second site without it: %+v, %v; want a failure naming revision %d", res, err, last.LastRevision)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed restore built %s: %v", dir, err)
	}
}

// A record of a fork that names the cluster's ID but not its past (added
// with the bucket's credentials, which a locked bucket keeps): the
// cluster, whose keys are those of the old timeline far past the fork the
// record says, does not take it for its own, and begins a timeline of its
// own from the old one where its keys agree; the default restore follows
// it to the cluster's data.
func TestAForgedForkIsNotTheClusters(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var early int64
	uploadWhile(t, cli, st, func() int64 {
		res, err := (etcdtest.Workload{Ops: 30, Prefix: "/k/", Seed: 41}).Run(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		early = res.LastRevision
		if res, err = (etcdtest.Workload{Ops: 120, Prefix: "/k/", Seed: 42}).Run(ctx, cli); err != nil {
			t.Fatal(err)
		}
		return res.LastRevision
	})
	id, err := capture.IdentityOf(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	before, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := snapshot.BeginTimeline(ctx, st, snapshot.Timeline{Parent: snapshot.FirstTimeline, ForkRevision: early, ClusterID: id.ClusterID,
		Reason: "restored to an early revision"}, time.Now(), before.All())
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := capture.Place(ctx, cli, st, capture.PlaceOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Began || l.Timeline.ID == forged.ID || l.Timeline.Parent != snapshot.FirstTimeline || l.Timeline.ForkRevision <= early ||
		!strings.Contains(l.Reason, "it went on in first, not from revision") {
		t.Fatalf("placed %+v (%s); want a timeline of its own forked from first past %d", l.Timeline, l.Reason, early)
	}
	t.Log(l.Reason)
	defaultRestoreIsTheCluster(ctx, t, st, cli)
}

// The old timeline's cluster starts again beside a clone restored from
// the middle of its chain, which forked and wrote a chain of its own on
// the same prefix: the old cluster, whose keys are the old timeline's to
// its end, is no restore to the middle. It begins a timeline of its own
// from the old one's end, and its backups restore to its own keys.
func TestTheOldClusterBesideItsClone(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	old := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	ocli := old.Client(t)
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	workload := func(cli *clientv3.Client, prefix string, ops int, seed uint64) int64 {
		t.Helper()
		res, err := (etcdtest.Workload{Ops: ops, Prefix: prefix, Seed: seed}).Run(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		return res.LastRevision
	}
	var mid int64
	uploadWhile(t, ocli, st, func() int64 {
		mid = workload(ocli, "/old/", 60, 51)
		return workload(ocli, "/old/", 60, 52)
	})
	// The clone is a restore with the old member's name, peer URL and
	// token, as etcd-druid's would be: the same cluster ID. It runs while
	// the old member is stopped, and stops before it starts again.
	m := old.Members[0]
	m.Stop()
	clone, _ := restored(t, st, restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: mid}}, Member: member.Spec{Name: m.Name, PeerURLs: []string{m.PeerURL.String()}, Token: "etcdtest"}})
	ccli := clone.Client(t)
	uploadWhile(t, ccli, st, func() int64 { return workload(ccli, "/clone/", 40, 53) })
	clone.Close()
	m.Restart(t)
	cat, err := snapshot.List(ctx, st)
	if err != nil || cat.Timeline.Parent != snapshot.FirstTimeline || cat.Timeline.ForkRevision != mid {
		t.Fatalf("the clone's timeline: %+v %v", cat.Timeline, err)
	}
	oldEnd := workload(ocli, "/old/", 5, 54)
	l, _, err := capture.Place(ctx, ocli, st, capture.PlaceOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Began || l.Timeline.Parent != snapshot.FirstTimeline || l.Timeline.ForkRevision <= mid || !strings.Contains(l.Reason, "it went on in first, not from revision") {
		t.Fatalf("the old cluster placed in %+v (%s); want a timeline of its own forked from first past %d", l.Timeline, l.Reason, mid)
	}
	t.Log(l.Reason)
	uploadWhile(t, ocli, st, func() int64 { return oldEnd })
	rep, err := history.Verify(ctx, st, history.VerifyOptions{WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if want, err := history.LiveDigest(ctx, ocli, oldEnd); err != nil || rep.Digest != want || rep.Chain.LastRevision() != oldEnd {
		t.Fatalf("the newest timeline restores revision %d, %v; the old cluster is at %d, %v (%v)", rep.Chain.LastRevision(), rep.Digest, oldEnd, want, err)
	}
}

// A full named past what it holds (the bytes of a real one under a name
// of revision 99999, which anyone with the bucket's credentials can add
// and a locked bucket keeps) is no evidence: the sidecar refuses to place
// its backups and says which object it is and what to do, instead of
// comparing the cluster with revisions the chain never had; a restore
// says the same.
func TestAFullNamedPastItsContent(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, cli, st, s := snapshotterBeside(t)
	res, err := (etcdtest.Workload{Ops: 40, Prefix: "/k/", Seed: 61}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the chain reaches the cluster's end", 30*time.Second, func() bool { return s.Status().LastRevision >= res.LastRevision })
	full := s.Status().LastFull
	rc, err := st.Get(ctx, full.Key)
	if err != nil {
		t.Fatal(err)
	}
	forged := fmt.Sprintf("v2/Full-00000000-00099999-%d", full.Created.Unix()+1)
	err = st.Put(ctx, forged, rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = capture.Place(ctx, cli, st, capture.PlaceOptions{SpoolDir: t.TempDir(), DryRun: true})
	if !errors.Is(err, snapshot.ErrNotABackup) || !strings.Contains(err.Error(), forged) || !strings.Contains(err.Error(), "x-etcd-snapshot-exclude=true") {
		t.Fatalf("placed beside %s: %v", forged, err)
	}
	t.Log(err)
	_, err = restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}})
	if !errors.Is(err, restore.ErrDamaged) || !strings.Contains(err.Error(), "x-etcd-snapshot-exclude=true") {
		t.Fatalf("restore: %v", err)
	}

	// Retention counts only fulls that hold what their names say: kept as
	// the newest of one, the copy would expire the real full and every
	// delta. Its identity record copied beside it names the real full.
	idOf := func(s snapshot.Snapshot) string {
		return fmt.Sprintf("etcdkit/identity/Full-%08d-%08d-%d.json", s.StartRevision, s.LastRevision, s.Created.Unix())
	}
	forgedSnap, err := snapshot.Parse(forged)
	if err != nil {
		t.Fatal(err)
	}
	if rc, err = st.Get(ctx, idOf(full)); err != nil {
		t.Fatal(err)
	}
	err = st.Put(ctx, idOf(forgedSnap), rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	before, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := snapshot.GC(ctx, st, snapshot.Retention{Policy: snapshot.LimitBased, MaxFulls: 1}, snapshot.GCOptions{SpoolDir: t.TempDir()})
	if err != nil || len(gc.Deleted) != 0 || len(gc.SetAside) != 1 || gc.SetAside[0].Snapshot.Key != forged || !errors.Is(gc.SetAside[0].Why, snapshot.ErrNotABackup) {
		t.Fatalf("retention beside %s: deleted %d, set aside %v, %v", forged, len(gc.Deleted), gc.SetAside, err)
	}
	t.Log(gc.SetAside[0].Why)
	after, err := snapshot.List(ctx, st)
	if err != nil || len(after.All()) != len(before.All()) {
		t.Fatalf("%d of %d snapshots left: %v", len(after.All()), len(before.All()), err)
	}
}

// Timeline records that tell nothing: one that cannot be read, the
// newest, and one named in 2100, holding no snapshot. The second is set
// aside; the first leaves a restore nothing to take by default and says
// which timeline holds the backups; the cluster is placed on the timeline
// before it and begins its own after both, which restores to its keys.
func TestRecordsThatTellNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	uploadWhile(t, cli, st, func() int64 {
		res, err := (etcdtest.Workload{Ops: 60, Prefix: "/k/", Seed: 43}).Run(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		return res.LastRevision
	})
	future := "etcdkit/timelines/4102444800-0badf00d.json"
	// A second on, so that it holds none of the chain written this second.
	garbled := fmt.Sprintf("etcdkit/timelines/%d-deadbeef.json", time.Now().Unix()+1)
	for key, body := range map[string]string{future: `{"cluster_id":"1","reason":"by hand"}`, garbled: `{"cluster_id":`} {
		if err := st.Put(ctx, key, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.SetAside) != 1 || cat.SetAside[0].Key != future || cat.Timeline.ID != "deadbeef" || !cat.Timeline.Unreadable {
		t.Fatalf("set aside %+v, newest %+v", cat.SetAside, cat.Timeline)
	}
	t.Log(cat.SetAside[0].Reason)
	_, err = restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}})
	if !errors.Is(err, snapshot.ErrNoFull) || !strings.Contains(err.Error(), "--timeline first restores") {
		t.Fatalf("restore beside the unreadable record: %v", err)
	}
	t.Log(err)
	l, _, err := capture.Place(ctx, cli, st, capture.PlaceOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Began || l.Timeline.Parent != snapshot.FirstTimeline || l.Timeline.ForkRevision == 0 || !strings.Contains(l.Reason, "cannot be read") {
		t.Fatalf("placed %+v (%s); want a timeline of its own forked from first at its end", l.Timeline, l.Reason)
	}
	t.Log(l.Reason)
	defaultRestoreIsTheCluster(ctx, t, st, cli)
}

// defaultRestoreIsTheCluster checks that a restore of st with no target
// holds what the cluster cli reaches holds.
func defaultRestoreIsTheCluster(ctx context.Context, t *testing.T, st store.Store, cli *clientv3.Client) {
	t.Helper()
	r, _ := restored(t, st, restore.Options{})
	got, err := history.LiveDigest(ctx, r.Client(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := history.LiveDigest(ctx, cli, 0)
	if err != nil || got != want {
		t.Fatalf("the default restore sums to %v, the cluster to %v (%v)", got, want, err)
	}
}
