package withetcd_test

import (
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdkit/etcdkit/validate/internal/files"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// checkSnap's verdicts are those of etcd's snap.Read: on a snap file etcd
// wrote, and on thousands of damaged copies of it (bytes flipped, cut
// short, zeroed).
func TestCheckSnapAgreesWithEtcd(t *testing.T) {
	dir := t.TempDir()
	index, term := uint64(42), uint64(3)
	voters := []uint64{1, 2, 3}
	s := &raftpb.Snapshot{Data: []byte("the store's state, as etcd's v2 store saved it"),
		Metadata: &raftpb.SnapshotMetadata{Index: &index, Term: &term, ConfState: &raftpb.ConfState{Voters: voters, Learners: []uint64{4}}}}
	if err := snap.New(zap.NewNop(), dir).SaveSnap(s); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(names) != 1 {
		t.Fatalf("etcd wrote %d snap files", len(names))
	}
	good, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := files.CheckSnap(good); err != nil {
		t.Fatalf("etcd's own snap file: %v", err)
	}
	if file, err := files.CheckSnaps(dir, &files.SnapshotRecord{Index: index, Term: term}); err != nil {
		t.Fatalf("the newest record's file: %s: %v", file, err)
	}
	if _, err := files.CheckSnaps(dir, &files.SnapshotRecord{Index: index + 1, Term: term}); err == nil {
		t.Fatal("a snapshot record without its snap file passed")
	}
	r := rand.New(rand.NewPCG(3, 4))
	damaged := filepath.Join(t.TempDir(), "damaged.snap")
	agreed, refused := 0, 0
	for trial := range 5000 {
		b := append([]byte(nil), good...)
		switch trial % 3 {
		case 0:
			for range 1 + r.IntN(3) {
				b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
			}
		case 1:
			b = b[:r.IntN(len(b))]
		default:
			at := r.IntN(len(b))
			clear(b[at : at+min(len(b)-at, 1+r.IntN(16))])
		}
		if err := os.WriteFile(damaged, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, etcdErr := snap.Read(zap.NewNop(), damaged)
		ours := files.CheckSnap(b)
		if (etcdErr == nil) != (ours == nil) {
			t.Fatalf("trial %d: etcd's snap.Read says %v, checkSnap says %v", trial, etcdErr, ours)
		}
		agreed++
		if ours != nil {
			refused++
		}
	}
	t.Logf("%d damaged copies, %d refused by both, the rest read by both", agreed, refused)

	// Damage under a CRC that matches it: only the decoding of the raft
	// snapshot can tell, as etcd's unmarshalling does.
	data, err := proto.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	refused = 0
	for trial := range 5000 {
		d := append([]byte(nil), data...)
		if trial%2 == 0 {
			d[r.IntN(len(d))] ^= byte(1 + r.IntN(255))
		} else {
			d = d[:r.IntN(len(d))+1]
		}
		crc := crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), d)
		b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(crc))
		b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), d)
		if err := os.WriteFile(damaged, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, etcdErr := snap.Read(zap.NewNop(), damaged)
		ours := files.CheckSnap(b)
		if (etcdErr == nil) != (ours == nil) {
			t.Fatalf("trial %d under a good CRC: etcd's snap.Read says %v, checkSnap says %v", trial, etcdErr, ours)
		}
		if ours != nil {
			refused++
		}
	}
	t.Logf("under a good CRC: %d of 5000 damaged raft snapshots refused by both, the rest read by both", refused)
}
