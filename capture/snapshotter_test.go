package capture_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

func TestSnapshotterMemoryLimitNeverSplitsARevision(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := newStore(t)
	const limit = 64 << 10
	r := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour, DeltaMemoryLimit: limit})
	r.Await(t, capture.OpFull)

	value := string(make([]byte, 2048))
	var bigTxn, lastPut int64
	for i := range 400 {
		if i == 150 {
			ops := make([]clientv3.Op, 100)
			for j := range ops {
				ops[j] = clientv3.OpPut(fmt.Sprintf("/txn/%03d", j), value)
			}
			resp, err := cli.Txn(ctx).Then(ops...).Commit()
			if err != nil {
				t.Fatal(err)
			}
			bigTxn = resp.Header.Revision
		}
		resp, err := cli.Put(ctx, fmt.Sprintf("/k/%03d", i%50), value)
		if err != nil {
			t.Fatal(err)
		}
		lastPut = resp.Header.Revision
	}
	// The limit may have taken the last put already: then there is
	// nothing left for the on-demand delta, and that is right, once that
	// delta lands.
	if _, err := r.TakeDelta(ctx); errors.Is(err, capture.ErrNoEvents) {
		for deadline := time.Now().Add(10 * time.Second); r.Status().LastRevision < lastPut; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("on-demand delta: %v, and the deltas reach %d, not the last put's %d", err, r.Status().LastRevision, lastPut)
			}
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if _, err := r.TakeDelta(ctx); !errors.Is(err, capture.ErrNoEvents) {
		t.Fatalf("second on-demand delta: %v, want ErrNoEvents", err)
	}
	r.Stop(t)

	deltas := r.Written(capture.OpDelta)
	if len(deltas) < 5 {
		t.Fatalf("%d deltas for about 1 MiB of events at a 64 KiB limit", len(deltas))
	}
	// A delta passes the limit only with its last revision.
	for _, d := range deltas {
		events := readDelta(t, st, d.Snapshot, snapshot.Codec{})
		lastRev := events[len(events)-1].Revision()
		before := 0
		for _, ev := range events {
			if ev.Revision() != lastRev {
				before += len(ev.EtcdEvent.Kv.Key) + len(ev.EtcdEvent.Kv.Value)
			}
		}
		if before >= limit {
			t.Errorf("%s (%s) held %d bytes before its last revision, limit %d", d.Snapshot.Key, d.Reason, before, limit)
		}
	}
	checkChain(t, cli, st, snapshot.Codec{})
	cat, _ := snapshot.List(ctx, st)
	holding := 0
	for _, s := range cat.Snapshots {
		if s.Kind != snapshot.KindDelta || s.StartRevision > bigTxn || s.LastRevision < bigTxn {
			continue
		}
		holding++
		n := 0
		for _, ev := range readDelta(t, st, s, snapshot.Codec{}) {
			if ev.Revision() == bigTxn {
				n++
			}
		}
		if n != 100 {
			t.Fatalf("%s holds %d of the 100 events of revision %d", s.Key, n, bigTxn)
		}
	}
	if holding != 1 {
		t.Fatalf("revision %d is in %d deltas", bigTxn, holding)
	}
}

func TestSnapshotterResumesAfterRestart(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := newStore(t)

	a := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	a.Await(t, capture.OpFull)
	before, err := (etcdtest.Workload{Ops: 100, Seed: 6}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	a.Stop(t)
	last := a.Written(capture.OpDelta)
	if len(last) != 1 || last[0].Reason != "stop" || last[0].Snapshot.LastRevision != before.LastRevision {
		t.Fatalf("stopping wrote %+v, want one delta up to %d", last, before.LastRevision)
	}
	// Started again with nothing new, it says which snapshots end the
	// chain, read from the store.
	again := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	etcdtest.Eventually(t, "the restarted snapshotter reads the chain", 10*time.Second, func() bool {
		return again.Status().LastFull.Key != ""
	})
	if st := again.Status(); st.LastDelta.Key != last[0].Snapshot.Key {
		t.Fatalf("after restart the last delta is %q, the store's is %s", st.LastDelta.Key, last[0].Snapshot.Key)
	}
	again.Stop(t)

	while, err := (etcdtest.Workload{Ops: 100, Seed: 7, TxnPercent: 30}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	b := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	first := b.Await(t, capture.OpDelta)
	if first.Reason != "startup" || first.Snapshot.StartRevision != before.LastRevision+1 || first.Snapshot.LastRevision != while.LastRevision {
		t.Fatalf("first delta after restart: %s (%s), want %d-%d", first.Snapshot.Key, first.Reason, before.LastRevision+1, while.LastRevision)
	}
	if fulls := b.Written(capture.OpFull); len(fulls) != 0 {
		t.Fatalf("restart took a full snapshot: %+v", fulls)
	}
	full, err := b.TakeFull(ctx)
	if err != nil || full.LastRevision != while.LastRevision {
		t.Fatalf("on-demand full: %s, %v", full.Key, err)
	}
	// A final full is an ordinary full with .final, and the chain goes on
	// from it.
	final, err := b.TakeFinal(ctx)
	if err != nil || !final.Final || !strings.HasSuffix(final.Key, ".final") || final.LastRevision != while.LastRevision {
		t.Fatalf("final full: %s (final %v), %v", final.Key, final.Final, err)
	}
	b.Stop(t)
	checkChain(t, cli, st, snapshot.Codec{})
}

func TestSnapshotterTakesAFullWhenHistoryIsCompacted(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := newStore(t)

	a := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	a.Await(t, capture.OpFull)
	a.Stop(t)
	res, err := (etcdtest.Workload{Ops: 50, Seed: 8}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, res.LastRevision); err != nil {
		t.Fatal(err)
	}
	b := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	full := b.Await(t, capture.OpFull)
	if full.Reason != "compacted" || full.Snapshot.LastRevision != res.LastRevision {
		t.Fatalf("full after compaction: %s (%s)", full.Snapshot.Key, full.Reason)
	}
}

// Another cluster's chain, with its identity record or without one (as
// etcd-backup-restore, copy or cp leave it: the full's database names its
// members), is refused, counted and tried again (the store may be fixed
// meanwhile), and nothing is written. Allowed a new chain, the cluster
// begins a timeline of its own, and the other's stays as it was.
func TestSnapshotterRefusesAnotherClustersChain(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		identity   bool
	}{
		{"with its identity", "was taken of cluster", true},
		{"without identity", "none of this cluster's", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			st := newStore(t)
			old := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
			oldCli := old.Client(t)
			if _, err := (etcdtest.Workload{Ops: 100, Seed: 9}).Run(ctx, oldCli); err != nil {
				t.Fatal(err)
			}
			theirs, err := capture.Full(ctx, oldCli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if !tc.identity {
				if err := st.Delete(ctx, "etcdkit/identity/"+strings.TrimPrefix(theirs.Key, "v2/")+".json"); err != nil {
					t.Fatal(err)
				}
			}
			fresh := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
			var refused atomic.Int32
			s, err := capture.New(fresh.Client(t), st, capture.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, SpoolDir: t.TempDir(),
				OnResult: func(r capture.Result) {
					if errors.Is(r.Err, snapshot.ErrOtherCluster) {
						refused.Add(1)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- s.Run(runCtx) }()
			etcdtest.Eventually(t, "refused three times", 20*time.Second, func() bool { return refused.Load() >= 3 })
			st2 := s.Status()
			if st2.Failures < 3 || st2.FailingSince.IsZero() || !strings.Contains(st2.LastError, tc.want) || !strings.Contains(st2.LastError, "--allow-new-chain") {
				t.Fatalf("status while refusing: %+v", st2)
			}
			stop()
			if err := <-ran; err != nil {
				t.Fatalf("Run after cancel: %v", err)
			}
			if keys, _ := st.List(ctx, "v2/"); len(keys) != 1 {
				t.Fatalf("another cluster's chain was written to: %v", keys)
			}

			r := start(t, fresh.Client(t), st, capture.Options{AllowNewChain: true, DeltaPeriod: time.Hour})
			if full := r.Await(t, capture.OpFull); full.Reason != "new timeline" {
				t.Fatalf("allowed a new chain: %s (%s)", full.Snapshot.Key, full.Reason)
			}
			r.Stop(t)
			cat, err := snapshot.List(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if cat.Timeline.ID == snapshot.FirstTimeline || cat.Timeline.Parent != snapshot.FirstTimeline || cat.Timeline.ForkRevision != 0 || len(cat.Own()) != 1 {
				t.Fatalf("the new chain's timeline: %+v, own %v", cat.Timeline, cat.Own())
			}
			first, err := cat.On(snapshot.FirstTimeline)
			if err != nil {
				t.Fatal(err)
			}
			if chain, err := first.Latest(); err != nil || chain.Full.Key != theirs.Key || len(chain.Deltas) != 0 {
				t.Fatalf("the other cluster's timeline: %+v %v", chain, err)
			}
		})
	}
}

// flaky fails the next Puts it is told to, as a store that is down does.
type flaky struct {
	store.Store
	fail atomic.Int32
}

func (f *flaky) Put(ctx context.Context, key string, r io.Reader) error {
	if f.fail.Add(-1) >= 0 {
		return errors.New("store unavailable (injected)")
	}
	return f.Store.Put(ctx, key, r)
}

func TestSnapshotterRetriesWithoutLosingEvents(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := &flaky{Store: newStore(t)}

	var fenced atomic.Int32
	fenced.Store(2)
	r := start(t, cli, st, capture.Options{
		DeltaPeriod: 100 * time.Millisecond,
		// Fencing: the first two uploads are refused, as for a sidecar
		// that is not the uploader yet.
		BeforeUpload: func(context.Context, snapshot.Snapshot) error {
			if fenced.Add(-1) >= 0 {
				return errors.New("not the uploader")
			}
			return nil
		},
	})
	full := r.Await(t, capture.OpFull)
	if failed := r.Failed(capture.OpFull); failed != 2 {
		t.Fatalf("%d failed full snapshots before %s, want the 2 fenced ones", failed, full.Snapshot.Key)
	}
	if cat, _ := snapshot.List(ctx, st); len(cat.Snapshots) != 1 {
		t.Fatalf("fenced attempts left objects: %v", cat)
	}

	st.fail.Store(3)
	res, err := (etcdtest.Workload{Ops: 200, Seed: 10, TxnPercent: 20}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	for r.Status().LastRevision < res.LastRevision {
		r.Await(t, capture.OpDelta)
	}
	if f := r.Status().Failures; f != 0 {
		t.Fatalf("%d failures still counted after success", f)
	}
	r.Stop(t)
	if failed := r.Failed(capture.OpDelta); failed != 3 {
		t.Fatalf("%d failed deltas, want the 3 injected", failed)
	}
	checkChain(t, cli, st, snapshot.Codec{})
}

func TestOnDemandNeedsRun(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{})
	s, err := capture.New(c.Client(t), newStore(t), capture.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeFull(context.Background()); !errors.Is(err, capture.ErrNotRunning) {
		t.Fatalf("TakeFull before Run: %v", err)
	}
	if _, err := capture.New(c.Client(t), newStore(t), capture.Options{FullSchedule: "every hour"}); err == nil {
		t.Fatal("a bad schedule was accepted")
	}
}

// A new full snapshot first closes the previous chain up to its own
// revision, so every revision stays restorable from one chain or the other.
func TestSnapshotterClosesTheChainBeforeAFull(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := newStore(t)
	r := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	first := r.Await(t, capture.OpFull)
	res, err := (etcdtest.Workload{Ops: 80, Seed: 12}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.TakeFull(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.Stop(t)
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for rev := first.Snapshot.LastRevision; rev <= second.LastRevision; rev++ {
		chain, err := cat.ContainingRevision(rev)
		if err == nil {
			_, err = chain.Check()
		}
		if err != nil {
			t.Fatalf("revision %d (workload up to %d, fulls at %d and %d): %v", rev, res.LastRevision, first.Snapshot.LastRevision, second.LastRevision, err)
		}
	}
	var before int
	for _, d := range r.Written(capture.OpDelta) {
		if d.Reason == "before full" {
			before++
			if d.Snapshot.LastRevision > second.LastRevision {
				t.Fatalf("%s reaches past the full at %d", d.Snapshot.Key, second.LastRevision)
			}
		}
	}
	if before == 0 {
		t.Fatal("no delta closed the chain before the full")
	}
}

// The delta that closes a chain before a full goes to the store the full
// just reached; when it fails (the store went down right after the full),
// the backups fail from that attempt on, in Status and the results, so
// /readyz reports the outage from its start, not from the next delta's
// failure a store's retries later.
func TestAFailedDeltaBeforeAFullCountsAsAFailure(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := newStore(t)
	var armed, refused atomic.Bool
	r := start(t, cli, st, capture.Options{
		DeltaPeriod: time.Hour,
		MinBackoff:  time.Hour, MaxBackoff: time.Hour, // the failure stays on record
		BeforeUpload: func(_ context.Context, s snapshot.Snapshot) error {
			if s.Kind == snapshot.KindDelta && armed.Load() && !refused.Swap(true) {
				return errors.New("store unavailable (injected)")
			}
			return nil
		},
	})
	r.Await(t, capture.OpFull)
	if _, err := (etcdtest.Workload{Ops: 40, Seed: 13}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	before := time.Now()
	full, err := r.TakeFull(ctx)
	if err != nil {
		t.Fatalf("the full itself failed: %v", err)
	}
	if !refused.Load() {
		t.Fatal("no delta closed the chain before the full: nothing was injected")
	}
	st2 := r.Status()
	if st2.Failures != 1 || st2.FailingSince.Before(before) || st2.LastFull.Key != full.Key {
		t.Fatalf("after the full %s and the failed delta before it: failures %d, failing since %v (full asked at %v), last full %s",
			full.Key, st2.Failures, st2.FailingSince, before, st2.LastFull.Key)
	}
	if f := r.Failed(capture.OpDelta); f != 1 {
		t.Fatalf("%d failed deltas reported, want the one before the full", f)
	}
}

// Once a newer timeline began on the prefix (another cluster, restored
// from these backups, writes there now), every object this cluster writes
// would belong to it: the snapshotter stops writing, says why, and the
// new timeline holds nothing of this cluster's.
func TestSnapshotterStopsWhenSuperseded(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st := newStore(t)
	r := start(t, cli, st, capture.Options{DeltaPeriod: 50 * time.Millisecond})
	r.Await(t, capture.OpFull)
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := snapshot.BeginTimeline(ctx, st, snapshot.Timeline{Parent: snapshot.FirstTimeline, ClusterID: "other"}, time.Now().Add(time.Second), cat.All())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/after", "x"); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the snapshotter refuses", 30*time.Second, func() bool { return r.Status().Refused == capture.RefusedSuperseded })
	if msg := r.Status().LastError; !strings.Contains(msg, newer.ID) || !strings.Contains(msg, "another prefix") {
		t.Fatalf("the refusal says: %s", msg)
	}
	if cat, err = snapshot.List(ctx, st); err != nil || len(cat.Own()) != 0 {
		t.Fatalf("the newer timeline holds %v (%v)", cat.Own(), err)
	}
}

// down fails every call while it is down, as a store in an outage does,
// and only writes while it is read-only, as a bucket whose policy lost
// its write grant does.
type down struct {
	store.Store
	out, readOnly atomic.Bool
}

var errDown = errors.New("store unavailable (outage)")

func (d *down) Put(ctx context.Context, key string, r io.Reader) error {
	if d.out.Load() || d.readOnly.Load() {
		return errDown
	}
	return d.Store.Put(ctx, key, r)
}

func (d *down) List(ctx context.Context, prefix string) ([]store.Object, error) {
	if d.out.Load() {
		return nil, errDown
	}
	return d.Store.List(ctx, prefix)
}

// After an outage long enough for the backoff to grow, the backups resume
// as soon as the store answers again, not when the backoff ends: the
// store is probed meanwhile, and the delta that lands is the probe's
// retry. The outage is one warning, not one per attempt; a store that
// lists but refuses writes answers every probe, and is said to answer
// again once, not once per probe.
func TestSnapshotterResumesWhenTheStoreAnswers(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st := &down{Store: newStore(t)}
	log, text := logged()
	r := start(t, cli, st, capture.Options{DeltaPeriod: 50 * time.Millisecond, Logger: log,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Minute, ProbeInterval: 20 * time.Millisecond})
	r.Await(t, capture.OpFull)
	st.out.Store(true)
	if _, err := cli.Put(ctx, "/during", "x"); err != nil {
		t.Fatal(err)
	}
	// The sixth failure puts the next retry 3.2 s off: the outage ends
	// right after it, and the probe, 20 ms on, brings the retry.
	etcdtest.Eventually(t, "the backoff grows", 30*time.Second, func() bool { return r.Status().Failures >= 6 })
	st.out.Store(false)
	for {
		res := r.Await(t, capture.OpDelta)
		if res.Snapshot.LastRevision >= 2 {
			if res.Reason != "answers again" {
				t.Fatalf("the delta after the outage came from %q, not from the probe", res.Reason)
			}
			break
		}
	}
	said := func(what string) int { return strings.Count(text(), what) }
	if n := said("level=WARN msg=\"snapshot failed"); n != 1 {
		t.Fatalf("the outage was logged %d times as a warning, want once:\n%s", n, text())
	}

	answered := said("answer again")
	st.readOnly.Store(true)
	if _, err := cli.Put(ctx, "/read-only", "x"); err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "probes and retries against a read-only store", 30*time.Second, func() bool { return r.Status().Failures >= 6 })
	if n := said("answer again") - answered; n != 1 {
		t.Fatalf("a read-only store was said to answer again %d times, want once:\n%s", n, text())
	}
	// Writable again before the stop, which writes the last delta.
	st.readOnly.Store(false)
}

// logged is a logger at level info and what it has written so far.
func logged() (*slog.Logger, func() string) {
	var (
		mu   sync.Mutex
		logs strings.Builder
	)
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(b)
	}), nil))
	return log, func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// slow holds each Put until released, then fails it: a store whose SDK
// retries for seconds before it gives up.
type slow struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (s *slow) Put(ctx context.Context, key string, r io.Reader) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return errDown
}

// The backups fail from the moment the failing attempt began, not from
// when the store's own retries gave up: /readyz, which compares that
// moment with --max-backup-age, reports an outage that much sooner. The
// moment is the local clock's, whatever Options.Now says (a clock that
// jumped names objects, it does not time an outage).
func TestFailingSinceIsTheFailedAttemptsStart(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st := &slow{Store: newStore(t), entered: make(chan struct{}, 1), release: make(chan struct{})}
	s, err := capture.New(cli, st, capture.Options{DeltaPeriod: time.Hour, SpoolDir: t.TempDir(), MinBackoff: time.Hour,
		Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	}()
	<-st.entered
	released := time.Now()
	close(st.release)
	etcdtest.Eventually(t, "the full snapshot fails", 30*time.Second, func() bool { return s.Status().Failures > 0 })
	if since := s.Status().FailingSince; since.Before(before) || !since.Before(released) {
		t.Fatalf("failing since %s: want the attempt's start, between %s and %s (the store was entered)", since, before, released)
	}
}

// A full asked for while another runs waits for it and gets its result;
// a repeat of a request whose caller gave up before its end gets that
// result too; a request whose answer was received is never answered with
// an older full, nor is a final one with a plain one (etcd-druid's retry
// after a client timeout must not start a second stream from the leader,
// and an operator's full after writes must hold them).
func TestOnDemandFullsJoinTheOneInFlight(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st := chaintest.NewHeldFulls(newStore(t))
	r := start(t, cli, st, capture.Options{DeltaPeriod: capture.Off})
	r.Await(t, capture.OpFull)
	type answer struct {
		snap snapshot.Snapshot
		err  error
	}
	take := func(ctx context.Context) <-chan answer {
		ch := make(chan answer, 1)
		go func() { s, err := r.TakeFull(ctx); ch <- answer{s, err} }()
		return ch
	}
	st.Armed.Store(true)

	// Asked while one runs: its result.
	first := take(ctx)
	held := <-st.Entered
	second := take(ctx)
	etcdtest.Eventually(t, "the second full is asked for", 10*time.Second, func() bool { return r.Status().Demanded == 2 })
	st.Release <- struct{}{}
	a, b := <-first, <-second
	if a.err != nil || b.err != nil || a.snap.Key != b.snap.Key {
		t.Fatalf("the first got %s (%v), the one asked during its upload (%s) %s (%v)", a.snap.Key, a.err, held, b.snap.Key, b.err)
	}
	r.Await(t, capture.OpFull)

	// A caller that gave up while its full ran asks again after its end.
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	st.Armed.Store(true)
	gaveUp, cancel := context.WithCancel(ctx)
	third := take(gaveUp)
	<-st.Entered
	cancel()
	if c := <-third; !errors.Is(c.err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v", c.err)
	}
	st.Release <- struct{}{}
	held = r.Await(t, capture.OpFull).Snapshot.Key
	again, err := r.TakeFull(ctx)
	if err != nil || again.Key != held {
		t.Fatalf("the repeat of a request that gave up: %s (%v), want %s", again.Key, err, held)
	}
	// That answer was received: the next request is a full of its own.
	next, err := r.TakeFull(ctx)
	if err != nil || next.Key == held {
		t.Fatalf("a request after an answered one: %s (%v), want a new full", next.Key, err)
	}
	final, err := r.TakeFinal(ctx)
	if err != nil || final.Key == next.Key || !final.Final {
		t.Fatalf("a final full after a plain one: %+v (%v)", final, err)
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cat.Fulls()); n != 5 {
		t.Fatalf("%d full snapshots on the store, want 5: the start's, the one two asked for, the one asked again, the next, the final", n)
	}
}

// A sidecar whose clock lags the one that began its timeline names its
// objects when the timeline began, not before: named earlier, they would
// belong to the timeline before it and leave this one's chain a gap.
func TestNamesNeverPrecedeTheirTimeline(t *testing.T) {
	ctx := ctxT(t)
	st := newStore(t)
	old := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	if _, err := capture.Full(ctx, old.Client(t), st, snapshot.FullOptions{SpoolDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	fresh := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := fresh.Client(t)
	var lag atomic.Bool
	now := func() time.Time {
		if lag.Load() {
			return time.Now().Add(-10 * time.Minute)
		}
		return time.Now()
	}
	r := start(t, cli, st, capture.Options{AllowNewChain: true, DeltaPeriod: time.Hour, Now: now})
	full := r.Await(t, capture.OpFull)
	lag.Store(true)
	res, err := (etcdtest.Workload{Ops: 50, Seed: 11}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	r.Stop(t)
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := cat.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if chain.Full.Key != full.Snapshot.Key || chain.LastRevision() != res.LastRevision || cat.Timeline.ID == snapshot.FirstTimeline {
		t.Fatalf("the new timeline %s holds %s to revision %d, want %s to %d; all: %v", cat.Timeline, chain.Full.Key, chain.LastRevision(), full.Snapshot.Key, res.LastRevision, cat.Snapshots)
	}
	for _, d := range chain.Deltas {
		if d.Created.Before(cat.Timeline.Began) {
			t.Fatalf("%s is named before its timeline began (%s)", d.Key, cat.Timeline.Began)
		}
	}
	checkChain(t, cli, st, snapshot.Codec{})
}

// A chain whose end the cluster compacted while nothing uploaded, and
// whose newest keys were all written again since, is continued: keys the
// chain's last delta wrote earlier, untouched since, still tell that the
// cluster's past is the chain's (a busy cluster's newest keys are the
// likeliest to be written again, its older ones the likeliest to stay).
func TestSnapshotterContinuesAChainWhoseEndIsCompacted(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st := newStore(t)
	put := func(prefix string, n int) int64 {
		var rev int64
		for i := range n {
			resp, err := cli.Put(ctx, fmt.Sprintf("%s/%03d", prefix, i), fmt.Sprintf("%s-%d", prefix, rev))
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	put("base", 20)
	a := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	a.Await(t, capture.OpFull)
	put("cold", 60)
	end := put("hot", 40)
	a.Stop(t)
	if d := a.Written(capture.OpDelta); len(d) != 1 || d[0].Snapshot.LastRevision != end {
		t.Fatalf("stopping wrote %+v, want one delta to %d", d, end)
	}
	// Every key of the chain's newest revisions is written again, and the
	// chain's end is compacted.
	now := put("hot", 40)
	if _, err := cli.Compact(ctx, now); err != nil {
		t.Fatal(err)
	}
	b := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	full := b.Await(t, capture.OpFull)
	b.Stop(t)
	if full.Reason != "compacted" {
		t.Fatalf("after the compaction: %s (%s), want a full for the compacted history", full.Snapshot.Key, full.Reason)
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Timelines) != 1 {
		t.Fatalf("the store holds timelines %v, the cluster lived one past", cat.Timelines)
	}
}

// An event received by a clock that then steps back (an NTP step, a
// VM's clock corrected) waits no longer than the delta period: its due,
// by the clock it was received by, is far ahead of the clock now.
func TestAClockSteppedBackDelaysNoDelta(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	st := newStore(t)
	// The next reading of the clock after ahead is set is an hour ahead:
	// the one that stamps the event as received.
	var ahead atomic.Bool
	now := func() time.Time {
		if ahead.CompareAndSwap(true, false) {
			return time.Now().Add(time.Hour)
		}
		return time.Now()
	}
	r := start(t, cli, st, capture.Options{DeltaPeriod: 200 * time.Millisecond, Now: now})
	r.Await(t, capture.OpFull)
	ahead.Store(true)
	resp, err := cli.Put(ctx, "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Await(t, capture.OpDelta); d.Snapshot.LastRevision != resp.Header.Revision {
		t.Fatalf("the delta after the clock stepped back: %s, want revision %d", d.Snapshot.Key, resp.Header.Revision)
	}
	r.Stop(t)
}

// A snapshotter stopped after its cluster lost quorum cannot catch up
// (the cluster does not answer its revision), and still writes the
// events it received, which exist nowhere else once the member is gone.
func TestStopWithoutQuorumWritesWhatWasReceived(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Members[0].Client(t)
	st := newStore(t)
	log, text := logged()
	r := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour, StopTimeout: 6 * time.Second, Logger: log})
	r.Await(t, capture.OpFull)
	put, err := cli.Put(ctx, "/received", "before the quorum went")
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "the put received", 30*time.Second, func() bool { return r.Status().PendingEvents > 0 })
	c.Members[1].Kill()
	c.Members[2].Kill()
	r.Stop(t)
	chain := chaintest.Latest(t, st)
	if got := chain.LastRevision(); got < put.Header.Revision {
		t.Fatalf("the chain ends at revision %d, before the put at %d that was received", got, put.Header.Revision)
	}
	if !strings.Contains(text(), "catching up before stop failed; wrote what was received") {
		t.Fatalf("the stop did not say it wrote what was received:\n%s", text())
	}
}
