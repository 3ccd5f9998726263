package withetcd_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdkit/etcdkit/validate/internal/files"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// sectorSize is the unit a torn write of etcd's WAL is made of.
const sectorSize = 512

// The member and cluster IDs the test WALs' metadata names, as etcd
// writes it.
const testMemberID, testClusterID = 0x8e9e05c52164694d, 0xcdf818194e3a8c32

func walMetadata(t testing.TB) []byte {
	t.Helper()
	b, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: proto.Uint64(testMemberID), ClusterID: proto.Uint64(testClusterID)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeWAL writes one segment of n entries of varied sizes, with a
// snapshot record, through etcd's own WAL writer, and returns its bytes
// without the preallocated tail.
func writeWAL(t testing.TB, n int) []byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := wal.Create(zap.NewNop(), dir, walMetadata(t))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := uint64(1); i <= uint64(n); i++ {
		idx, term, typ := i, uint64(1), raftpb.EntryNormal
		e := &raftpb.Entry{Index: &idx, Term: &term, Type: &typ, Data: bytes.Repeat([]byte{byte(i)}, r.IntN(2000))}
		if err := w.Save(&raftpb.HardState{}, []*raftpb.Entry{e}); err != nil {
			t.Fatal(err)
		}
		if i == uint64(n/2) {
			snap := i
			if err := w.SaveSnapshot(&walpb.Snapshot{Index: &snap, Term: &term, ConfState: &raftpb.ConfState{}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = w.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	// Frames are 8-byte aligned: the last one's zero padding stays.
	return b[:min(len(b), (end+7)/8*8)]
}

// etcdRead reads a segment with etcd's decoder: whether it is damaged,
// torn, and its last entry's index.
func etcdRead(t *testing.T, path string) (damaged, torn bool, last uint64) {
	defer func() {
		if recover() != nil {
			damaged = true
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	dec := wal.NewDecoder(fileutil.NewFileReader(f))
	rec := &walpb.Record{}
	for {
		err := dec.Decode(rec)
		switch {
		case errors.Is(err, io.EOF):
			return false, false, last
		case errors.Is(err, io.ErrUnexpectedEOF):
			return false, true, last
		case err != nil:
			return true, false, last
		}
		switch rec.GetType() {
		case wal.CrcType:
			if crc := dec.LastCRC(); crc != 0 && rec.Validate(crc) != nil {
				return true, false, last
			}
			dec.UpdateCRC(rec.GetCrc())
		case wal.EntryType:
			e := &raftpb.Entry{}
			if err := proto.Unmarshal(rec.GetData(), e); err != nil {
				return true, false, last
			}
			last = e.GetIndex()
		}
	}
}

// Our decoder agrees with etcd's on undamaged, torn and damaged segments:
// bytes flipped, sectors zeroed, the file cut anywhere.
func TestReadWALAgreesWithEtcd(t *testing.T) {
	seg := writeWAL(t, 200)
	r := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	path := filepath.Join(dir, "0000000000000000-0000000000000000.wal")
	outcomes := map[string]int{}
	for trial := range 600 {
		b := append([]byte(nil), seg...)
		what := "intact"
		switch trial % 4 {
		case 1:
			what = "flipped"
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		case 2:
			what = "sector zeroed"
			off := r.IntN(len(b)) &^ (sectorSize - 1)
			clear(b[off:min(len(b), off+sectorSize)])
		case 3:
			what = "cut"
			b = b[:r.IntN(len(b))]
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		damaged, torn, last := etcdRead(t, path)
		w, err := files.ReadWAL(dir, 0, true)
		if (err != nil) != damaged || w.Torn != torn || (err == nil && uint64(w.Unapplied) != last) {
			t.Fatalf("trial %d (%s): etcd says damaged=%v torn=%v last=%d; ours err=%v torn=%v last=%d",
				trial, what, damaged, torn, last, err, w.Torn, w.Unapplied)
		}
		switch {
		case damaged:
			outcomes["damaged"]++
		case torn:
			outcomes["torn"]++
		default:
			outcomes["whole"]++
		}
		if trial == 0 && (last != 200 || w.Snapshot.Index != 100) {
			t.Fatalf("intact segment: last entry %d, snapshot %d; want 200, 100", last, w.Snapshot.Index)
		}
	}
	// Each outcome is common enough that the comparison means something.
	for _, o := range []string{"damaged", "torn", "whole"} {
		if outcomes[o] < 50 {
			t.Errorf("only %d of 600 trials were %s: %v", outcomes[o], o, outcomes)
		}
	}
	t.Log(outcomes)
}

// Across segments: only the last may be torn, none may be missing, and
// reading only the last finds the same last entry as reading them all.
func TestReadWALSegments(t *testing.T) {
	saved := wal.SegmentSizeBytes
	wal.SegmentSizeBytes = 16 << 10
	t.Cleanup(func() { wal.SegmentSizeBytes = saved })
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := wal.Create(zap.NewNop(), dir, walMetadata(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 300; i++ {
		idx, term, typ := i, uint64(1), raftpb.EntryNormal
		e := &raftpb.Entry{Index: &idx, Term: &term, Type: &typ, Data: make([]byte, 500)}
		if err := w.Save(&raftpb.HardState{}, []*raftpb.Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(names) < 4 {
		t.Fatalf("%d segments, want at least 4", len(names))
	}
	for _, cindex := range []uint64{0, 250, 300, 400} {
		all, err := files.ReadWAL(dir, cindex, true)
		if err != nil {
			t.Fatal(err)
		}
		last, err := files.ReadWAL(dir, cindex, false)
		if err != nil {
			t.Fatal(err)
		}
		if all.MemberID != testMemberID || all.ClusterID != testClusterID {
			t.Errorf("cindex %d: the WAL names member %x of cluster %x, want %x of %x", cindex, all.MemberID, all.ClusterID, uint64(testMemberID), uint64(testClusterID))
		}
		if want := int64(max(300, cindex) - cindex); all.Unapplied != want || last.Unapplied != want {
			t.Errorf("cindex %d: whole says %d unapplied, last segment %d; want %d", cindex, all.Unapplied, last.Unapplied, want)
		}
	}

	copyDir := func(t *testing.T) (string, []string) {
		d := t.TempDir()
		var out []string
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, filepath.Base(n))
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
		return d, out
	}
	t.Run("middle segment missing", func(t *testing.T) {
		d, segs := copyDir(t)
		if err := os.Remove(segs[1]); err != nil {
			t.Fatal(err)
		}
		for _, whole := range []bool{true, false} {
			if _, err := files.ReadWAL(d, 0, whole); err == nil {
				t.Errorf("whole=%v: no error", whole)
			} else {
				t.Log(err)
			}
		}
	})
	t.Run("middle segment cut", func(t *testing.T) {
		d, segs := copyDir(t)
		if err := os.Truncate(segs[1], 5000); err != nil {
			t.Fatal(err)
		}
		if _, err := files.ReadWAL(d, 0, true); err == nil {
			t.Error("no error")
		} else {
			t.Log(err)
		}
	})
	t.Run("last segment cut", func(t *testing.T) {
		d, segs := copyDir(t)
		if err := os.Truncate(segs[len(segs)-1], 5000); err != nil {
			t.Fatal(err)
		}
		for _, whole := range []bool{true, false} {
			w, err := files.ReadWAL(d, 0, whole)
			if err != nil || !w.Torn || w.Unapplied >= 300 {
				t.Errorf("whole=%v: torn=%v unapplied=%d err=%v; want torn, fewer than 300", whole, w.Torn, w.Unapplied, err)
			}
		}
	})
}

// A follower that fell behind gets the leader's snapshot: its WAL records
// the snapshot, and its entries go on after the snapshot's index, past
// the last one it had. etcd reads that WAL; so does ReadWAL. (The fault
// soak found every follower stopped long enough for a snapshot judged
// Corrupt at its next start, and rejoined from scratch.)
func TestReadWALEntriesSkipAheadAfterALeaderSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := wal.Create(zap.NewNop(), dir, walMetadata(t))
	if err != nil {
		t.Fatal(err)
	}
	term, typ := uint64(1), raftpb.EntryNormal
	save := func(from, to uint64) {
		for i := from; i <= to; i++ {
			idx := i
			if err := w.Save(&raftpb.HardState{}, []*raftpb.Entry{{Index: &idx, Term: &term, Type: &typ}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	save(1, 50)
	snap := uint64(120)
	if err := w.SaveSnapshot(&walpb.Snapshot{Index: &snap, Term: &term, ConfState: &raftpb.ConfState{}}); err != nil {
		t.Fatal(err)
	}
	save(121, 130)
	_ = w.Close()

	r, err := wal.OpenForRead(zap.NewNop(), dir, &walpb.Snapshot{Index: &snap, Term: &term})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ents, err := r.ReadAll(); err != nil || len(ents) != 10 {
		t.Fatalf("etcd reads %d entries after the snapshot, %v; want 10", len(ents), err)
	}
	_ = r.Close()
	got, err := files.ReadWAL(dir, 0, true)
	if err != nil {
		t.Fatalf("ReadWAL: %v", err)
	}
	if got.Snapshot == nil || got.Snapshot.Index != 120 || got.Unapplied != 130 {
		t.Fatalf("ReadWAL: snapshot %+v, last entry %d; want 120, 130", got.Snapshot, got.Unapplied)
	}
}

// Entries in etcd 3.5's v2 form are counted, and told apart by what they
// write: a member's attributes and the cluster version (etcd 3.6 applies
// them as membership), or the v2 store itself (etcd 3.6 panics on them).
// An etcd 3.6 request (with a header) is neither. The v2 requests are
// encoded as etcd 3.5 writes them, field by field.
func TestReadWALTellsV2Entries(t *testing.T) {
	request := func(method, path, val string) []byte {
		b := protowire.AppendTag(nil, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, 42)
		for i, s := range []string{method, path, val} {
			b = protowire.AppendTag(b, protowire.Number(i+2), protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
		return b
	}
	wrapped := func(req []byte) []byte { // an InternalRaftRequest carrying it in V2
		b := protowire.AppendTag(nil, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, 43)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendBytes(b, req)
	}
	v3, err := proto.Marshal(&etcdserverpb.InternalRaftRequest{Header: &etcdserverpb.RequestHeader{ID: 7}, Put: &etcdserverpb.PutRequest{Key: []byte("k")}})
	if err != nil {
		t.Fatal(err)
	}
	datas := [][]byte{
		request("PUT", "/0/members/8e9e05c52164694d/attributes", `{"name":"m0"}`),
		request("PUT", "/0/version", "3.5.0"),
		wrapped(request("PUT", "/0/version", "3.5.0")),
		v3,
		request("PUT", "/1/custom", "v"),
		wrapped(request("DELETE", "/1/custom", "")),
	}
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := wal.Create(zap.NewNop(), dir, walMetadata(t))
	if err != nil {
		t.Fatal(err)
	}
	term, typ := uint64(1), raftpb.EntryNormal
	for i, data := range datas {
		idx := uint64(i + 1)
		if err := w.Save(&raftpb.HardState{}, []*raftpb.Entry{{Index: &idx, Term: &term, Type: &typ, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()
	got, err := files.ReadWAL(dir, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	// etcd 3.7 applies the ones carried in an InternalRaftRequest (it
	// reads the ID and drops the field); etcd 3.6 reads them as v2.
	if got.Foreign != 3 || got.FirstForeign != 1 || got.V2Custom != 2 {
		t.Fatalf("bare v2 entries %d from %d, v2 store writes %d; want 3 from 1, 2", got.Foreign, got.FirstForeign, got.V2Custom)
	}
}
