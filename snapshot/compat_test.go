package snapshot

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// ebrEvent is etcd-backup-restore's delta entry, declared as it declares it
// but for the event's type: WatchEvent marshals as etcd's clientv3.Event
// does, which the module snapshot/internal/withetcd holds it to.
type ebrEvent struct {
	EtcdEvent *WatchEvent `json:"etcdEvent"`
	Time      time.Time   `json:"time"`
}

// randomEvents covers what the hand-written JSON must get right: empty
// and binary keys and values, zero fields, previous values, times with
// and without nanoseconds.
func randomEvents(n int) ([]Event, []ebrEvent) {
	r := rand.New(rand.NewPCG(1, 2))
	bytesOf := func(max int) []byte {
		b := make([]byte, r.IntN(max))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	kv := func() *KeyValue {
		return &KeyValue{
			Key: bytesOf(40), Value: bytesOf(300), CreateRevision: r.Int64N(3) * r.Int64(),
			ModRevision: r.Int64N(1 << 40), Version: r.Int64N(3), Lease: r.Int64N(2) * r.Int64(),
		}
	}
	var ours []Event
	var theirs []ebrEvent
	for range n {
		ev := &WatchEvent{Type: EventType(r.IntN(2))}
		if r.IntN(10) > 0 {
			ev.Kv = kv()
		}
		if r.IntN(3) == 0 {
			ev.PrevKv = kv()
		}
		at := time.Unix(r.Int64N(2e9), r.Int64N(1e9)*int64(r.IntN(2))).UTC()
		ours = append(ours, Event{EtcdEvent: ev, Time: at})
		if ev.Kv != nil && ev.Kv.Lease != 0 && r.IntN(2) == 0 {
			ours[len(ours)-1].LeaseTTL = 1 + r.Int64N(1e6)
		}
		if r.IntN(100) == 0 {
			ours[len(ours)-1].Auth = &Auth{Enabled: r.IntN(2) == 0, Revision: r.Uint64(),
				Users: []AuthUser{{Name: "root", Roles: []string{"root"}}, {Name: "<u&>"}},
				Roles: []AuthRole{{Name: "root"}, {Name: "r", Permissions: []AuthPermission{{Type: "READ", Key: bytesOf(10), RangeEnd: bytesOf(3)}}}}}
		}
		if r.IntN(20) == 0 {
			for range 1 + r.IntN(3) {
				ours[len(ours)-1].RevokedLeases = append(ours[len(ours)-1].RevokedLeases, r.Int64())
			}
		}
		theirs = append(theirs, ebrEvent{EtcdEvent: ev, Time: at})
	}
	return ours, theirs
}

func TestHandWrittenJSONIsJSONMarshal(t *testing.T) {
	ours, _ := randomEvents(5000)
	want, err := json.Marshal(ours)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := writeDelta(&got, ours, Annotations{}); err != nil {
		t.Fatal(err)
	}
	if g := got.Bytes()[:got.Len()-checksumSize]; !bytes.Equal(g, want) {
		for i := range min(len(g), len(want)) {
			if g[i] != want[i] {
				t.Fatalf("differs at byte %d:\ngot  %q\nwant %q", i, g[max(0, i-80):min(len(g), i+80)], want[max(0, i-80):min(len(want), i+80)])
			}
		}
		t.Fatalf("lengths %d and %d", len(g), len(want))
	}
}

func sampleEvents() []*WatchEvent {
	return []*WatchEvent{
		{Type: Put, Kv: &KeyValue{Key: []byte("/a"), Value: []byte("1"), CreateRevision: 11, ModRevision: 11, Version: 1}},
		{Type: Put, Kv: &KeyValue{Key: []byte("/b"), Value: []byte("<&>"), CreateRevision: 12, ModRevision: 12, Version: 1, Lease: 7587862}},
		{Type: Put, Kv: &KeyValue{Key: []byte("/c"), Value: []byte{0, 255}, CreateRevision: 12, ModRevision: 12, Version: 1}},
		{Type: Delete, Kv: &KeyValue{Key: []byte("/a"), ModRevision: 13}},
	}
}

// The delta we write must be the very bytes etcd-backup-restore writes
// for the same events: json.Marshal of the slice, then its raw SHA-256.
func TestDeltaBytesMatchEtcdBackupRestore(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	var ours []Event
	var theirs []ebrEvent
	for _, ev := range sampleEvents() {
		ours = append(ours, Event{EtcdEvent: ev, Time: at})
		theirs = append(theirs, ebrEvent{EtcdEvent: ev, Time: at})
	}
	want, err := json.Marshal(theirs)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(want)
	want = append(want, sum[:]...)
	var got bytes.Buffer
	if err := writeDelta(&got, ours, Annotations{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("delta bytes differ\ngot  %q\nwant %q", got.Bytes(), want)
	}

	// And the documented shape, read without our types.
	var shape []struct {
		EtcdEvent map[string]any `json:"etcdEvent"`
		Time      string         `json:"time"`
	}
	if err := json.Unmarshal(got.Bytes()[:got.Len()-checksumSize], &shape); err != nil {
		t.Fatal(err)
	}
	if len(shape) != 4 {
		t.Fatalf("%d entries", len(shape))
	}
	kv := shape[1].EtcdEvent["kv"].(map[string]any)
	if kv["key"] != base64.StdEncoding.EncodeToString([]byte("/b")) || kv["mod_revision"] != float64(12) || kv["lease"] != float64(7587862) {
		t.Fatalf("event 1 as JSON: %v", shape[1])
	}
	if shape[0].Time != "2026-11-29T10:00:00.123456789Z" {
		t.Fatalf("time %q", shape[0].Time)
	}
	if _, ok := shape[0].EtcdEvent["type"]; ok {
		t.Fatal("a PUT carries a type; etcd omits the zero value")
	}
	if shape[3].EtcdEvent["type"] != float64(1) {
		t.Fatalf("a DELETE has type %v, want 1", shape[3].EtcdEvent["type"])
	}
}

// What etcdkit adds to a delta (lease TTLs, revocations, users and roles) leaves it a
// delta etcd-backup-restore reads: its decoder, with its own struct, takes
// every event as it was and ignores the rest.
func TestEtcdBackupRestoreReadsDeltasWithLeases(t *testing.T) {
	ours, theirs := randomEvents(2000)
	extras := 0
	for _, ev := range ours {
		if ev.LeaseTTL != 0 || len(ev.RevokedLeases) > 0 || ev.Auth != nil {
			extras++
		}
	}
	if extras < 100 {
		t.Fatalf("only %d events carry lease fields", extras)
	}
	var b bytes.Buffer
	if err := writeDelta(&b, ours, Annotations{}); err != nil {
		t.Fatal(err)
	}
	payload := b.Bytes()[:b.Len()-checksumSize]
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], b.Bytes()[b.Len()-checksumSize:]) {
		t.Fatal("the trailer is not the SHA-256 of the JSON")
	}
	// etcd-backup-restore decodes a delta with json.Unmarshal into a slice
	// of its types.Event (pkg/snapshot/restorer, applyFirstDeltaSnapshot
	// and applySnaps).
	var read []ebrEvent
	if err := json.Unmarshal(payload, &read); err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(theirs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(read)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("etcd-backup-restore's decoder reads other events than the ones written")
	}
}

// Objects written the way etcd-backup-restore writes them are listed,
// chained and read back.
func TestReadsEtcdBackupRestoreObjects(t *testing.T) {
	ctx := context.Background()
	st := store.NewMem()
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		_, _ = w.Write(b)
		_ = w.Close()
		return buf.Bytes()
	}
	withSum := func(b []byte) []byte {
		sum := sha256.Sum256(b)
		return append(bytes.Clone(b), sum[:]...)
	}
	db := bytes.Repeat([]byte("not a real bbolt file, only bytes "), 1000)
	var theirs []ebrEvent
	for _, ev := range sampleEvents() {
		theirs = append(theirs, ebrEvent{EtcdEvent: ev, Time: time.Now().UTC()})
	}
	events, _ := json.Marshal(theirs)
	objects := map[string][]byte{
		"v2/Full-00000000-00000010-1700000000.gz":       gz(withSum(db)),
		"v2/Incr-00000011-00000013-1700000060.gz":       gz(withSum(events)),
		"v2/Full-00000000-00000009-1690000000.gz.final": gz(withSum(db)),
	}
	for k, v := range objects {
		if err := st.Put(ctx, k, bytes.NewReader(v)); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := cat.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if chain, err = chain.Check(); err != nil || chain.Full.Key != "v2/Full-00000000-00000010-1700000000.gz" || len(chain.Deltas) != 1 {
		t.Fatalf("chain %+v: %v", chain, err)
	}
	rc, err := Open(ctx, st, chain.Full, Codec{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, db) {
		t.Fatalf("full: %v", err)
	}
	d, err := OpenDelta(ctx, st, chain.Deltas[0], Codec{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	var revs []int64
	for _, ev := range readEvents(t, d) {
		revs = append(revs, ev.Revision())
	}
	if fmt.Sprint(revs) != "[11 12 12 13]" {
		t.Fatalf("revisions %v", revs)
	}
}

func FuzzDeltaReader(f *testing.F) {
	var good bytes.Buffer
	var evs []Event
	for _, ev := range sampleEvents() {
		evs = append(evs, Event{EtcdEvent: ev, Time: time.Unix(1700000000, 0)})
	}
	_ = writeDelta(&good, evs, Annotations{})
	f.Add(good.Bytes())
	f.Add([]byte("[]"))
	f.Add([]byte(`[{"etcdEvent":{"kv":{"mod_revision":3}},"time":"x"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := newDeltaReader(io.NopCloser(newVerifier(bytes.NewReader(b))), "fuzz")
		last := int64(0)
		for range 10000 {
			ev, err := d.Next()
			if err != nil {
				return
			}
			if ev.EtcdEvent == nil || ev.EtcdEvent.Kv == nil || ev.Revision() < last {
				t.Fatalf("an event passed that must not: %+v", ev)
			}
			last = ev.Revision()
		}
	})
}

// The fast parser reads what encoding/json reads, field for field.
func TestFastParserAgreesWithEncodingJSON(t *testing.T) {
	ours, _ := randomEvents(5000)
	same := func(a, b *KeyValue) bool {
		if a == nil || b == nil {
			return a == b
		}
		return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && a.CreateRevision == b.CreateRevision &&
			a.ModRevision == b.ModRevision && a.Version == b.Version && a.Lease == b.Lease
	}
	for i, ev := range ours {
		b, err := appendEvent(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := fastEvent(b)
		if ev.Auth != nil {
			// Left to encoding/json, as rare as auth changes.
			if ok {
				t.Fatalf("event %d with users and roles parsed by the fast parser", i)
			}
			continue
		}
		if !ok {
			t.Fatalf("event %d not parsed: %s", i, b)
		}
		var std Event
		if err := json.Unmarshal(b, &std); err != nil {
			t.Fatal(err)
		}
		if fast.EtcdEvent.Type != std.EtcdEvent.Type || !same(fast.EtcdEvent.Kv, std.EtcdEvent.Kv) ||
			!same(fast.EtcdEvent.PrevKv, std.EtcdEvent.PrevKv) || !fast.Time.Equal(std.Time) ||
			fast.LeaseTTL != std.LeaseTTL || !slices.Equal(fast.RevokedLeases, std.RevokedLeases) {
			t.Fatalf("event %d: fast %v, encoding/json %v", i, fast, std)
		}
	}
	for _, odd := range []string{
		`{"etcdEvent":{"kv":{"key":"YQ==","mod_revision":3}},"time":"2026-11-29T10:00:00Z","extra":1}`,
		`{"time":"2026-11-29T10:00:00Z","etcdEvent":{"kv":{"key":"YQ==","mod_revision":3}}}`,
		`{ "etcdEvent":{"kv":{"key":"YQ==","mod_revision":3}},"time":"2026-11-29T10:00:00Z"}`,
		`{"etcdEvent":{"kv":{"key":"Y\u0051==","mod_revision":3}},"time":"2026-11-29T10:00:00Z"}`,
	} {
		if _, ok := fastEvent([]byte(odd)); ok {
			t.Errorf("the fast parser took %s; it must leave it to encoding/json", odd)
		}
	}
}

// What a delta adds to its last event is written on a copy: the watch
// loop reads the batch while it is uploaded, and a failed upload puts the
// batch back as it was.
func TestAnnotationsGoOnACopyOfTheLastEvent(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	events := []Event{
		{EtcdEvent: &WatchEvent{Kv: &KeyValue{Key: []byte("/a"), ModRevision: 4}}, Time: at},
		{EtcdEvent: &WatchEvent{Kv: &KeyValue{Key: []byte("/b"), ModRevision: 5}}, Time: at, RevokedLeases: make([]int64, 1, 4)},
	}
	a := Annotations{Revoked: []int64{7}, Auth: &Auth{Enabled: true, Revision: 3}}
	var b bytes.Buffer
	if err := writeDelta(&b, events, a); err != nil {
		t.Fatal(err)
	}
	if len(events[1].RevokedLeases) != 1 || events[1].RevokedLeases[:2][1] != 0 || events[1].Auth != nil {
		t.Fatalf("the batch's last event changed: %+v", events[1])
	}
	d := newDeltaReader(io.NopCloser(bytes.NewReader(b.Bytes()[:b.Len()-checksumSize])), "test")
	read := readEvents(t, d)
	if len(read) != 2 || read[0].Auth != nil || !slices.Equal(read[1].RevokedLeases, []int64{0, 7}) || read[1].Auth == nil || read[1].Auth.Revision != 3 {
		t.Fatalf("read back %+v", read)
	}
}

// readEvents reads a delta's events to its verified end.
func readEvents(t *testing.T, d *DeltaReader) []Event {
	t.Helper()
	var out []Event
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}
