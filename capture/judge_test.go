package capture

import (
	"hash/crc32"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
)

// A key both pasts lack says nothing of whether they are one; only a key
// written at the same revision with the same contents does, and one that
// differs says they are two.
func TestJudge(t *testing.T) {
	put := snapshot.KeyVersion{Key: []byte("k"), Create: 5, Mod: 9, Version: 2, Value: crc32.Checksum([]byte("v"), crc32.MakeTable(crc32.Castagnoli))}
	del := snapshot.KeyVersion{Key: []byte("k"), Mod: 9, Deleted: true}
	same := &mvccpb.KeyValue{Key: []byte("k"), CreateRevision: 5, ModRevision: 9, Version: 2, Value: []byte("v")}
	other := &mvccpb.KeyValue{Key: []byte("k"), CreateRevision: 5, ModRevision: 9, Version: 2, Value: []byte("w")}
	later := &mvccpb.KeyValue{Key: []byte("k"), CreateRevision: 5, ModRevision: 20, Version: 3, Value: []byte("x")}
	for _, tc := range []struct {
		name  string
		want  snapshot.KeyVersion
		got   *mvccpb.KeyValue
		atRev bool
		is    evidence
	}{
		{"put, same", put, same, true, evidenceSame},
		{"put, other value", put, other, true, evidenceDiffers},
		{"put, absent", put, nil, true, evidenceDiffers},
		{"deleted, absent", del, nil, true, evidenceNone},
		{"deleted, present", del, same, true, evidenceDiffers},
		{"compacted: put, same now", put, same, false, evidenceSame},
		{"compacted: put, written since", put, later, false, evidenceNone},
		{"compacted: deleted, absent now", del, nil, false, evidenceNone},
	} {
		if got, _ := judge(tc.want, tc.got, 10, tc.atRev); got != tc.is {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.is)
		}
	}
}

// A full of a cluster restored with a revision bump holds the bump as an
// empty key at the raised revision (etcdutl's record of it), which its
// tail names and no client can ask: the comparison leaves it out rather
// than fail on it ("key is not provided"), and a placement goes on.
func TestTailLeavesOutTheBumpsEmptyKey(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	resp, err := cli.Put(t.Context(), "/a", "v")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	tail := []snapshot.KeyVersion{{Key: nil, Mod: rev + 1000}, {Key: []byte("/a"), Create: rev, Mod: rev, Version: 1, Value: crc32.Checksum([]byte("v"), castagnoli)}}
	e, why, _, err := compareLive(t.Context(), cli, ownKeys(false).tail(tail), rev)
	if err != nil || e != evidenceSame {
		t.Fatalf("a tail with a bump's empty key: %v %q %v", e, why, err)
	}
}
