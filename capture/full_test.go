package capture_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

func TestFullThenDeltasHoldEveryEvent(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := newStore(t)

	if _, err := (etcdtest.Workload{Ops: 300, Seed: 1, DeletePercent: 10, TxnPercent: 10, LeasePercent: 10}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	status, err := cli.Status(ctx, c.Members[0].ClientURL.String())
	if err != nil {
		t.Fatal(err)
	}
	if full.LastRevision != status.Header.Revision {
		t.Fatalf("full snapshot named revision %d, cluster is at %d", full.LastRevision, status.Header.Revision)
	}
	base := readKeyspace(t, cli, full.LastRevision)

	// Known operations first, so the events can be checked one by one.
	put, err := cli.Put(ctx, "/known/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	txn, err := cli.Txn(ctx).Then(
		clientv3.OpPut("/known/b", "2"), clientv3.OpPut("/known/c", "3"), clientv3.OpDelete("/known/a"),
	).Commit()
	if err != nil {
		t.Fatal(err)
	}
	res, err := (etcdtest.Workload{Ops: 500, Seed: 2, DeletePercent: 15, TxnPercent: 15, LeasePercent: 10}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}

	written, err := capture.Delta(ctx, cli, st, full.LastRevision, capture.DeltaOptions{})
	if err != nil || len(written) != 1 {
		t.Fatalf("delta: %v, %v", written, err)
	}
	d1 := written[0]
	if d1.StartRevision != full.LastRevision+1 || d1.LastRevision != res.LastRevision {
		t.Fatalf("delta %s: want revisions %d-%d", d1.Key, full.LastRevision+1, res.LastRevision)
	}
	if _, err := capture.Delta(ctx, cli, st, d1.LastRevision, capture.DeltaOptions{}); !errors.Is(err, capture.ErrNoEvents) {
		t.Fatalf("delta with nothing new: got %v, want ErrNoEvents", err)
	}
	if _, err := cli.Delete(ctx, "/known/b"); err != nil {
		t.Fatal(err)
	}
	written, err = capture.Delta(ctx, cli, st, d1.LastRevision, capture.DeltaOptions{})
	if err != nil || len(written) != 1 {
		t.Fatalf("delta: %v, %v", written, err)
	}
	d2 := written[0]

	events := readDelta(t, st, d1, snapshot.Codec{})
	first := events[:4]
	wantFirst := []struct {
		typ      snapshot.EventType
		key, val string
		rev      int64
	}{
		{snapshot.Put, "/known/a", "1", put.Header.Revision},
		{snapshot.Put, "/known/b", "2", txn.Header.Revision},
		{snapshot.Put, "/known/c", "3", txn.Header.Revision},
		{snapshot.Delete, "/known/a", "", txn.Header.Revision},
	}
	for i, w := range wantFirst {
		kv := first[i].EtcdEvent.Kv
		if first[i].EtcdEvent.Type != w.typ || string(kv.Key) != w.key || string(kv.Value) != w.val || kv.ModRevision != w.rev {
			t.Errorf("event %d: got %v %s=%q at %d, want %v %s=%q at %d", i, first[i].EtcdEvent.Type, kv.Key, kv.Value, kv.ModRevision, w.typ, w.key, w.val, w.rev)
		}
	}
	last := full.LastRevision
	for _, ev := range events {
		if r := ev.Revision(); r != last && r != last+1 {
			t.Fatalf("revision %d follows %d: a revision is missing", r, last)
		} else {
			last = r
		}
		if ev.Time.IsZero() {
			t.Fatal("event without a time")
		}
	}
	events = append(events, readDelta(t, st, d2, snapshot.Codec{})...)
	base.Apply(t, events)
	if err := base.Diff(readKeyspace(t, cli, d2.LastRevision)); err != nil {
		t.Fatalf("full + deltas replayed: %v", err)
	}

	chain := chaintest.Latest(t, st)
	if chain, err = chain.Check(); err != nil || chain.LastRevision() != d2.LastRevision || len(chain.Deltas) != 2 {
		t.Fatalf("latest chain %+v, %v", chain, err)
	}
}

// The name of a full snapshot taken while writes go on must be the
// revision inside the file, not one read before or after the stream.
func TestFullUnderWritesIsNamedByItsContent(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := newStore(t)
	if _, err := (etcdtest.Workload{Ops: 2000, Keys: 2000, ValueSize: 2048, Seed: 3}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if _, err := cli.Put(ctx, "/busy", string(rune('a'+i%26))); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	})
	defer wg.Wait()
	defer stop.Store(true)

	for range 3 {
		full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := snapshot.Open(ctx, st, full, snapshot.Codec{})
		if err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(t.TempDir(), "db")
		f, err := os.Create(db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		_ = f.Close()
		inside, err := snapshot.DatabaseRevision(db)
		if err != nil {
			t.Fatal(err)
		}
		if inside != full.LastRevision {
			t.Fatalf("%s holds revision %d", full.Key, inside)
		}
	}
}

// failingSpool stages the snapshot in a file that refuses every write, as
// a spool on a full disk does.
type failingSpool struct {
	store.Store
	dir string
}

func (f failingSpool) Stage() (*os.File, error) {
	path := filepath.Join(f.dir, "staged")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return nil, err
	}
	return os.Open(path) // read-only: a write fails
}

func (failingSpool) PutStaged(context.Context, string, *os.File) error {
	return errors.New("a failing spool staged nothing")
}

// A full snapshot that fails on the sidecar's side (a full spool) ends
// etcd's stream too: a stream left open holds a read transaction on the
// member, and the member's next defragmentation then stops its writes for
// as long as the sidecar lives (the soak found a member stuck so).
func TestAFailedFullEndsEtcdsStream(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	// Larger than what gRPC buffers for a reader that stopped reading, so
	// a stream left open keeps the member's transaction open.
	value := strings.Repeat("x", 1<<20)
	for i := range 64 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/big/%02d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	_, err := capture.Full(ctx, cli, failingSpool{newStore(t), t.TempDir()}, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "etcd snapshot: snapshot into") {
		t.Fatalf("full snapshot into a spool that refuses writes: %v, want the spool's write error", err)
	}
	// With the stream still open the defragmentation waits for it: the
	// deadline is the failure, the answer the event.
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cli.Defragment(dctx, c.Endpoints()[0]); err != nil {
		t.Fatalf("defragmentation after the failed full: %v (etcd still streams the snapshot to nobody)", err)
	}
	if _, err := cli.Put(ctx, "/after", "x"); err != nil {
		t.Fatal(err)
	}
}
