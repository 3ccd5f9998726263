package tenant_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tenant"
)

// A tenant moves to a cluster of its own while its writer goes on: the
// move loads the tenant's state from the backups, follows the source's
// deltas, and at the cut-over (the writer stopped) asks the sidecar for a
// delta and applies it; the writer then writes to the target, which holds
// exactly what the source held, renamed. The downtime is the writer's
// pause: from its last write to the source to its first to the target.
func TestMoveATenantWhileItWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	dst := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	scli, dcli := src.Client(t), dst.Client(t)
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fulls := make(chan struct{}, 1)
	// The sidecar's default period: only the deltas asked for land
	// during the test.
	s, err := capture.New(scli, st, capture.Options{DeltaPeriod: 20 * time.Second, FullSchedule: "@every 1h", RetentionPeriod: capture.Off,
		SpoolDir: t.TempDir(), OnResult: func(r capture.Result) {
			if r.Op == capture.OpFull && r.Err == nil {
				select {
				case fulls <- struct{}{}:
				default:
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("snapshotter: %v", err)
		}
	}()
	lease, err := scli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		var opts []clientv3.OpOption
		if i%5 == 0 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		if _, err := scli.Put(ctx, fmt.Sprintf("/t/a/k%02d", i), "first", opts...); err != nil {
			t.Fatal(err)
		}
		if _, err := scli.Put(ctx, fmt.Sprintf("/other/k%02d", i), "noise"); err != nil {
			t.Fatal(err)
		}
	}
	// A key whose lease its client keeps alive in the source, for a TTL
	// far shorter than a move.
	short, err := scli.Grant(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	alive, err := scli.KeepAlive(ctx, short.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range alive {
		}
	}()
	if _, err := scli.Put(ctx, "/t/a/held", "by a lease", clientv3.WithLease(short.ID)); err != nil {
		t.Fatal(err)
	}
	<-fulls
	trigger := func(ctx context.Context) (int64, error) {
		d, err := s.TakeDelta(ctx)
		if errors.Is(err, capture.ErrNoEvents) {
			return 0, nil
		}
		return d.LastRevision, err
	}
	if _, err := trigger(ctx); err != nil {
		t.Fatal(err)
	}

	// The tenant's writer: a key at a time, a delete every seventh write,
	// beside another tenant's writes, until told to switch.
	switchNow, stopped := make(chan struct{}), make(chan time.Time, 1)
	go func() {
		var last time.Time
		defer func() { stopped <- last }()
		for i := 0; ; i++ {
			select {
			case <-switchNow:
				return
			default:
			}
			op := clientv3.OpPut(fmt.Sprintf("/t/a/k%02d", i%30), fmt.Sprint(i))
			if i%7 == 3 {
				op = clientv3.OpDelete(fmt.Sprintf("/t/a/k%02d", (i+11)%30))
			}
			if _, err := scli.Do(ctx, op); err != nil {
				t.Error(err)
				return
			}
			last = time.Now()
			if _, err := scli.Put(ctx, "/other/busy", fmt.Sprint(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()

	cutOver := make(chan struct{})
	followed := make(chan tenant.MoveProgress, 16)
	type result struct {
		m   tenant.Moved
		err error
	}
	moved := make(chan result, 1)
	go func() {
		m, err := tenant.Move(ctx, st, dcli, tenant.MoveOptions{Prefix: "/t/a/", Rename: restore.Rename{From: "/t/a/", To: "/t/b/"},
			Poll: 50 * time.Millisecond, CutOver: cutOver, Trigger: trigger,
			CutOverRevision: func(ctx context.Context) (int64, error) {
				resp, err := scli.Get(ctx, "/t/a/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					return 0, err
				}
				return resp.Header.Revision, nil
			},
			Followed: func(p tenant.MoveProgress) { followed <- p }})
		moved <- result{m, err}
	}()
	// The lease lives in the target under its ID while the move follows:
	// its TTL runs down and is renewed there.
	lowest := int64(3)
	etcdtest.Eventually(t, "the target's lease is renewed", 30*time.Second, func() bool {
		l, err := dcli.TimeToLive(ctx, short.ID)
		if err != nil || l.TTL < 0 {
			return false
		}
		lowest = min(lowest, l.TTL)
		return lowest < l.TTL
	})
	// One delta while the writer writes is followed before the cut-over.
	d, err := s.TakeDelta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p := range followed {
		if p.Revision >= d.LastRevision {
			break
		}
	}

	close(switchNow)
	lastWrite := <-stopped
	close(cutOver)
	r := <-moved
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := dcli.Put(ctx, "/t/b/switched", "yes"); err != nil {
		t.Fatal(err)
	}
	downtime := time.Since(lastWrite)
	m := r.m
	t.Logf("moved %d keys, then %d events in %d deltas; cut over at revision %d: %d revisions of lag closed in %v; the writer's downtime %v",
		len(m.Loaded.Created), m.Events, m.Deltas, m.CutOverAt, m.LagClosed, m.CutOverTook.Round(time.Millisecond), downtime.Round(time.Millisecond))
	if m.LagClosed == 0 || m.Deltas < 2 || m.Revision < m.CutOverAt || m.LeasesGranted != 2 || m.Leases != 2 {
		t.Fatalf("move: %+v", m)
	}
	if held, err := dcli.Get(ctx, "/t/b/held"); err != nil || len(held.Kvs) != 1 || held.Kvs[0].Lease != int64(short.ID) {
		t.Fatalf("the leased key in the target: %v, %v; want it under lease %x", held, err, short.ID)
	}

	srcKVs, err := scli.Get(ctx, "/t/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	dstKVs, err := dcli.Get(ctx, "/t/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, kv := range srcKVs.Kvs {
		want = append(want, "/t/b/"+string(kv.Key[len("/t/a/"):])+"="+string(kv.Value))
	}
	want = append(want, "/t/b/switched=yes")
	slices.Sort(want)
	for _, kv := range dstKVs.Kvs {
		got = append(got, string(kv.Key)+"="+string(kv.Value))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the target holds %v\nthe source held %v", got, want)
	}
	// Each leased key has its lease in the target: the same ID, the
	// same TTL.
	for _, kv := range srcKVs.Kvs {
		if kv.Lease == 0 {
			continue
		}
		l, err := scli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkLeased(ctx, dcli, "/t/b/"+string(kv.Key[len("/t/a/"):]), l.GrantedTTL); err != nil {
			t.Fatal(err)
		}
	}

	// A move that could not tell the last delta is refused, and a
	// cut-over whose sidecar does not answer fails rather than cut over
	// short.
	if _, err := tenant.Move(ctx, st, dcli, tenant.MoveOptions{Prefix: "/t/a/"}); err == nil {
		t.Fatal("a move without the source's revision or its sidecar was accepted")
	}
	down := make(chan struct{})
	close(down)
	_, err = tenant.Move(ctx, st, dcli, tenant.MoveOptions{Prefix: "/t/a/", Rename: restore.Rename{From: "/t/a/", To: "/t/b/"}, CutOver: down,
		Trigger: func(context.Context) (int64, error) { return 0, errors.New("connection refused") }})
	if err == nil || !strings.Contains(err.Error(), "the last delta cannot be told") {
		t.Fatalf("a cut-over without the sidecar's delta or the source's revision: %v", err)
	}
	// A move run again finds the lease of /t/a/held (the writer put the
	// others' keys again without theirs) in the target, and keeps it.
	again, err := tenant.Move(ctx, st, dcli, tenant.MoveOptions{Prefix: "/t/a/", Rename: restore.Rename{From: "/t/a/", To: "/t/b/"}, CutOver: down, Trigger: trigger})
	if err != nil || again.Leases != 1 || again.LeasesGranted != 0 {
		t.Fatalf("a move run again: %+v, %v; want its lease found in the target", again, err)
	}
}

// A move onto the cluster the backups were taken of is refused before it
// writes: its first state would put the backups' older keys over the
// tenant's newer ones.
func TestMoveOntoTheSourceIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	cli := c.Client(t)
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/app/k", "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/app/k", "new"); err != nil {
		t.Fatal(err)
	}
	_, err = tenant.Move(ctx, st, cli, tenant.MoveOptions{Prefix: "/app/", CutOverTimeout: time.Second,
		CutOverRevision: func(context.Context) (int64, error) { return 0, errors.New("not asked: the move is refused first") }})
	if err == nil || !strings.Contains(err.Error(), "the one the backups were taken of") {
		t.Fatalf("a move onto the source: %v", err)
	}
	resp, err := cli.Get(ctx, "/app/k")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Kvs[0].Value); got != "new" {
		t.Fatalf("/app/k is %q after the refused move, want the live %q", got, "new")
	}
}
