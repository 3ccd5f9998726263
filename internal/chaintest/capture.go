package chaintest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Running is a Snapshotter in its own goroutine with its results recorded.
type Running struct {
	*capture.Snapshotter
	cancel  context.CancelFunc
	done    chan error
	results chan capture.Result

	mu  sync.Mutex
	all []capture.Result
}

func Start(t *testing.T, cli *clientv3.Client, st store.Store, opts capture.Options) *Running {
	t.Helper()
	r := &Running{done: make(chan error, 1), results: make(chan capture.Result, 1000)}
	if opts.FullSchedule == "" {
		opts.FullSchedule = "@every 1h"
	}
	if opts.RetentionPeriod == 0 {
		opts.RetentionPeriod = -1
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = 50*time.Millisecond, 500*time.Millisecond
	}
	opts.SpoolDir = t.TempDir()
	opts.OnResult = func(res capture.Result) {
		if res.Err != nil {
			t.Logf("%s (%s) failed: %v", res.Op, res.Reason, res.Err)
		}
		r.mu.Lock()
		r.all = append(r.all, res)
		r.mu.Unlock()
		r.results <- res
	}
	s, err := capture.New(cli, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.Snapshotter = s
	// The test's context: Run stops at the test's end if Stop was not called.
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Stop cancels Run and waits for it: its last delta is written then.
func (r *Running) Stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop")
	}
}

// Await returns the next successful result of op, failing after a minute.
func (r *Running) Await(t *testing.T, op capture.Operation) capture.Result {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case res := <-r.results:
			if res.Op == op && res.Err == nil {
				return res
			}
		case <-deadline:
			t.Fatalf("no %s snapshot within a minute", op)
		}
	}
}

// Next delivers each result as it comes, failures included.
func (r *Running) Next() <-chan capture.Result { return r.results }

// All returns every result so far, failures included.
func (r *Running) All() []capture.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]capture.Result(nil), r.all...)
}

func (r *Running) Written(op capture.Operation) []capture.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []capture.Result
	for _, res := range r.all {
		if res.Op == op && res.Err == nil {
			out = append(out, res)
		}
	}
	return out
}

func (r *Running) Failed(op capture.Operation) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, res := range r.all {
		if res.Op == op && res.Err != nil {
			n++
		}
	}
	return n
}

// CheckReplay proves the store's latest chain replays to the live Keyspace.
func CheckReplay(t *testing.T, cli *clientv3.Client, st store.Store, c snapshot.Codec) snapshot.Chain {
	t.Helper()
	chain, err := Latest(t, st).Check()
	if err != nil {
		t.Fatal(err)
	}
	ks := ReadKeyspace(t, cli, chain.Full.LastRevision)
	next := chain.Full.LastRevision + 1
	for _, d := range chain.Deltas {
		if d.StartRevision != next {
			t.Fatalf("%s starts at %d, want %d: a gap or a duplicate", d.Key, d.StartRevision, next)
		}
		events := ReadDelta(t, st, d, c)
		if events[0].Revision() != d.StartRevision || events[len(events)-1].Revision() != d.LastRevision {
			t.Fatalf("%s holds revisions %d-%d", d.Key, events[0].Revision(), events[len(events)-1].Revision())
		}
		ks.Apply(t, events)
		next = d.LastRevision + 1
	}
	if err := ks.Diff(ReadKeyspace(t, cli, chain.LastRevision())); err != nil {
		t.Fatalf("chain replayed to %d: %v", chain.LastRevision(), err)
	}
	return chain
}

// Keyspace is the whole Keyspace at a revision with every field a restore
// must reproduce.
type Keyspace map[string]*snapshot.KeyValue

func ReadKeyspace(t testing.TB, cli *clientv3.Client, rev int64) Keyspace {
	t.Helper()
	resp, err := cli.Get(Ctx(t), "", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatalf("read Keyspace at %d: %v", rev, err)
	}
	ks := Keyspace{}
	for _, kv := range resp.Kvs {
		ks[string(kv.Key)] = &snapshot.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
			Version: kv.Version, Value: kv.Value, Lease: kv.Lease}
	}
	return ks
}

// Apply replays delta events the way a restore must: puts carry their own
// metadata, deletes remove.
func (ks Keyspace) Apply(t testing.TB, events []snapshot.Event) {
	t.Helper()
	for _, ev := range events {
		kv := ev.EtcdEvent.Kv
		switch ev.EtcdEvent.Type {
		case snapshot.Put:
			ks[string(kv.Key)] = kv
		case snapshot.Delete:
			if _, ok := ks[string(kv.Key)]; !ok {
				t.Errorf("revision %d deletes %q, which does not exist", kv.ModRevision, kv.Key)
			}
			delete(ks, string(kv.Key))
		}
	}
}

func (ks Keyspace) Diff(want Keyspace) error {
	for k, w := range want {
		g, ok := ks[k]
		if !ok {
			return fmt.Errorf("key %q missing", k)
		}
		if !bytes.Equal(g.Value, w.Value) || g.CreateRevision != w.CreateRevision || g.ModRevision != w.ModRevision || g.Version != w.Version || g.Lease != w.Lease {
			return fmt.Errorf("key %q: got %v, want %v", k, g, w)
		}
	}
	for k := range ks {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("key %q should not exist", k)
		}
	}
	return nil
}

func ReadDelta(t testing.TB, st store.Store, s snapshot.Snapshot, c snapshot.Codec) []snapshot.Event {
	t.Helper()
	d, err := snapshot.OpenDelta(Ctx(t), st, s, c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	var events []snapshot.Event
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			return events
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
}

// BackUp writes a full and a delta of the cluster under prefix, and with
// sidecar a drill record of the chain's digest as a sidecar's drill
// writes it (digest: "" for the live one).
func BackUp(t *testing.T, ctx context.Context, cli *clientv3.Client, bucket store.Store, prefix string, digest string) store.Store {
	t.Helper()
	st, err := store.WithPrefix(bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/k/"+prefix, "v"); err != nil {
		t.Fatal(err)
	}
	deltas, err := capture.Delta(ctx, cli, st, full.LastRevision, capture.DeltaOptions{})
	if err != nil || len(deltas) != 1 {
		t.Fatalf("delta: %v, %v", deltas, err)
	}
	live, err := history.LiveDigest(ctx, cli, deltas[0].LastRevision)
	if err != nil {
		t.Fatal(err)
	}
	if digest != "" {
		live.SHA256 = digest
	}
	if _, err := snapshot.WriteDrill(ctx, st, snapshot.DrillRecord{At: time.Now(), Source: snapshot.DrillBySidecar, Result: snapshot.DrillOK,
		Full: full.Key, Revision: live.Revision, Keys: live.Keys, SHA256: live.SHA256, Compared: true}); err != nil {
		t.Fatal(err)
	}
	return st
}

// NewStore is a file store in the test's temporary directory.
func NewStore(t testing.TB) store.Store {
	t.Helper()
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Ctx is the test's context with a deadline of two minutes.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
