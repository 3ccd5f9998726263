package restore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	snap "github.com/etcdkit/etcdkit/snapshot"
)

// Once the restore is cancelled the decoder must send nothing more: had it
// dropped one delta's batch and sent the next, the replay would fail on
// the gap instead of on the cancel. Each trial gives the old random choice
// between the consumer and ctx.Done() several chances to send.
func TestDecodeAheadSendsNothingOnceCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for trial := range 20 {
		dir := t.TempDir()
		f := newFetcher(nil, snap.Codec{}, dir, 1, 3)
		var deltas []*download
		for i := range 3 {
			d := &download{
				snap: snap.Snapshot{Key: fmt.Sprintf("v2/Incr-%08d-%08d-1", i+2, i+2)},
				path: filepath.Join(dir, fmt.Sprintf("delta-%06d.json", i)),
				done: make(chan struct{}),
			}
			writeDeltaPayload(t, d.path, int64(i+2))
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

// writeDeltaPayload writes a delta payload, as a download leaves it, of
// one put at rev.
func writeDeltaPayload(t *testing.T, path string, rev int64) {
	t.Helper()
	b, err := json.Marshal([]snap.Event{{
		EtcdEvent: &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: []byte("v"), CreateRevision: 2, ModRevision: rev, Version: rev - 1}},
		Time:      time.Unix(1, 0).UTC(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
