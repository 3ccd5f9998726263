package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// Once the restore is cancelled the decoder must send nothing more: had it
// dropped one delta's batch and sent the next, the replay would fail on
// the gap instead of on the cancel. Each trial gives the old random choice
// between the consumer and ctx.Done() several chances to send.
func TestDecodeAheadSendsNothingOnceCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for trial := range 20 {
		st, err := store.NewFile(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		f, err := newFetcher(st, snap.Codec{}, t.TempDir(), 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		var deltas []*download
		for i := range 3 {
			d := &download{
				snap: snap.Snapshot{Key: fmt.Sprintf("v2/Incr-%08d-%08d-1", i+2, i+2), Kind: snap.KindDelta},
				from: st,
				done: make(chan struct{}),
			}
			writeDeltaObject(t, st, d.snap.Key, int64(i+2))
			close(d.done)
			f.ahead <- struct{}{}
			deltas = append(deltas, d)
		}
		for b := range decodeAhead(ctx, f, deltas) {
			t.Fatalf("trial %d: the cancelled decoder sent a batch of %s (error %v)", trial, b.name, b.err)
		}
		f.wg.Wait()
	}
}

// writeDeltaObject stores a delta of one put at rev.
func writeDeltaObject(t *testing.T, st store.Store, key string, rev int64) {
	t.Helper()
	b, err := json.Marshal([]snap.Event{{
		EtcdEvent: &snap.WatchEvent{Type: snap.Put, Kv: &snap.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 2, ModRevision: rev, Version: rev - 1}},
		Time:      time.Unix(1, 0).UTC(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if err := st.Put(context.Background(), key, bytes.NewReader(append(b, sum[:]...))); err != nil {
		t.Fatal(err)
	}
}
