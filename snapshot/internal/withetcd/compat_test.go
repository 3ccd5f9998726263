package withetcd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// ebrEvent is etcd-backup-restore's delta entry, declared as it declares
// it (pkg/types).
type ebrEvent struct {
	EtcdEvent *clientv3.Event `json:"etcdEvent"`
	Time      time.Time       `json:"time"`
}

// randomEvents are etcd's watch events with what the JSON must get right:
// empty and binary keys and values, zero and negative fields, previous
// values, a missing key value, times with and without nanoseconds.
func randomEvents(n int) []ebrEvent {
	r := rand.New(rand.NewPCG(3, 4))
	bytesOf := func(max int) []byte {
		b := make([]byte, r.IntN(max))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	kv := func() *mvccpb.KeyValue {
		return &mvccpb.KeyValue{
			Key: bytesOf(40), Value: bytesOf(300), CreateRevision: r.Int64N(3) * r.Int64(),
			ModRevision: r.Int64N(1 << 40), Version: r.Int64N(3), Lease: (r.Int64N(3) - 1) * r.Int64(),
		}
	}
	var out []ebrEvent
	for range n {
		ev := &clientv3.Event{Type: mvccpb.Event_EventType(r.IntN(2))}
		if r.IntN(10) > 0 {
			ev.Kv = kv()
		}
		if r.IntN(3) == 0 {
			ev.PrevKv = kv()
		}
		out = append(out, ebrEvent{EtcdEvent: ev, Time: time.Unix(r.Int64N(2e9), r.Int64N(1e9)*int64(r.IntN(2))).UTC()})
	}
	return out
}

func ours(e *clientv3.Event) *snapshot.WatchEvent {
	kv := func(kv *mvccpb.KeyValue) *snapshot.KeyValue {
		if kv == nil {
			return nil
		}
		return &snapshot.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
			Version: kv.Version, Value: kv.Value, Lease: kv.Lease}
	}
	return &snapshot.WatchEvent{Type: snapshot.EventType(e.Type), Kv: kv(e.Kv), PrevKv: kv(e.PrevKv)}
}

// The on-store format's event marshals byte for byte as etcd's, and each
// reads the other's JSON back to the same event.
func TestWatchEventJSONIsEtcds(t *testing.T) {
	for i, ev := range randomEvents(3000) {
		want, err := json.Marshal(ev.EtcdEvent)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(ours(ev.EtcdEvent))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("event %d:\ngot  %s\nwant %s", i, got, want)
		}
		var back snapshot.WatchEvent
		if err := json.Unmarshal(want, &back); err != nil || !reflect.DeepEqual(&back, ours(ev.EtcdEvent)) && !emptyEqual(&back, ours(ev.EtcdEvent)) {
			t.Fatalf("event %d: etcd's JSON reads as %+v, %v", i, back, err)
		}
	}
	if snapshot.Put != snapshot.EventType(mvccpb.PUT) || snapshot.Delete != snapshot.EventType(mvccpb.DELETE) ||
		snapshot.Put.String() != mvccpb.PUT.String() || snapshot.Delete.String() != mvccpb.DELETE.String() {
		t.Fatal("the event types are not etcd's")
	}
}

// emptyEqual compares two events whose empty byte slices may differ as
// nil and empty: JSON leaves both out.
func emptyEqual(a, b *snapshot.WatchEvent) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// A delta written through the package's API is the very bytes
// etcd-backup-restore writes for the same events (json.Marshal of the
// slice, then its raw SHA-256), and etcdkit reads etcd-backup-restore's
// delta back to the same events.
func TestDeltaIsEtcdBackupRestoresBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// A delta holds events of keys; etcd-backup-restore's decoder would
	// take an event without one as well.
	var theirs []ebrEvent
	var events []snapshot.Event
	for _, ev := range randomEvents(2000) {
		if ev.EtcdEvent.Kv != nil {
			// In revision order, as a delta holds them.
			ev.EtcdEvent.Kv.ModRevision = int64(len(theirs) + 1)
			theirs = append(theirs, ev)
			events = append(events, snapshot.Event{EtcdEvent: ours(ev.EtcdEvent), Time: ev.Time})
		}
	}
	want, err := json.Marshal(theirs)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(want)
	want = append(want, sum[:]...)

	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := snapshot.NewDelta(1, 2, time.Unix(1e9, 0), snapshot.Codec{})
	if _, err := snapshot.WriteDelta(ctx, st, d, snapshot.Codec{}, events, snapshot.Annotations{}); err != nil {
		t.Fatal(err)
	}
	obj, err := st.Get(ctx, d.Key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	_ = obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the delta's bytes differ from etcd-backup-restore's: %d and %d bytes", len(got), len(want))
	}

	// etcd-backup-restore's own delta, read by etcdkit.
	theirKey := snapshot.NewDelta(3, 4, time.Unix(1e9, 0), snapshot.Codec{})
	if err := st.Put(ctx, theirKey.Key, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	dr, err := snapshot.OpenDelta(ctx, st, theirKey, snapshot.Codec{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dr.Close() }()
	for i := 0; ; i++ {
		ev, err := dr.Next()
		if errors.Is(err, io.EOF) {
			if i != len(events) {
				t.Fatalf("read %d events of %d", i, len(events))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !emptyEqual(ev.EtcdEvent, events[i].EtcdEvent) || !ev.Time.Equal(events[i].Time) {
			t.Fatalf("event %d reads as %+v", i, ev)
		}
	}
}
