package capture_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// keyspace is the whole keyspace at a revision with every field a restore
// must reproduce.
type keyspace map[string]*mvccpb.KeyValue

func readKeyspace(t testing.TB, cli *clientv3.Client, rev int64) keyspace {
	t.Helper()
	resp, err := cli.Get(context.Background(), "", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatalf("read keyspace at %d: %v", rev, err)
	}
	ks := keyspace{}
	for _, kv := range resp.Kvs {
		ks[string(kv.Key)] = kv
	}
	return ks
}

// apply replays delta events the way a restore must: puts carry their own
// metadata, deletes remove.
func (ks keyspace) apply(t testing.TB, events []snapshot.Event) {
	t.Helper()
	for _, ev := range events {
		kv := ev.EtcdEvent.Kv
		switch ev.EtcdEvent.Type {
		case mvccpb.PUT:
			ks[string(kv.Key)] = kv
		case mvccpb.DELETE:
			if _, ok := ks[string(kv.Key)]; !ok {
				t.Errorf("revision %d deletes %q, which does not exist", kv.ModRevision, kv.Key)
			}
			delete(ks, string(kv.Key))
		}
	}
}

func (ks keyspace) diff(want keyspace) error {
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

func readDelta(t testing.TB, st store.Store, s snapshot.Snapshot, c snapshot.Codec) []snapshot.Event {
	t.Helper()
	d, err := snapshot.OpenDelta(context.Background(), st, s, c)
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

func newStore(t testing.TB) store.Store {
	t.Helper()
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
