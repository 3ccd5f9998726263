package restore

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/etcdkit/etcdkit/snapshot"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// The replay writes KeyValues with its own encoder; a member reads them
// with etcd's. They must be the bytes proto.Marshal writes, so that the
// restored database is the one etcd would have written.
func TestKeyValueEncodingIsProtos(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ints := []int64{0, 1, 127, 128, 1 << 40, math.MaxInt64, -1, math.MinInt64}
	some := func() []byte {
		b := make([]byte, r.IntN(3)*r.IntN(300))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for range 5000 {
		kv := &mvccpb.KeyValue{Key: some(), Value: some(), CreateRevision: ints[r.IntN(len(ints))],
			ModRevision: ints[r.IntN(len(ints))], Version: ints[r.IntN(len(ints))], Lease: ints[r.IntN(len(ints))]}
		want, err := proto.Marshal(kv)
		if err != nil {
			t.Fatal(err)
		}
		ours := &snapshot.KeyValue{Key: kv.Key, Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
			Version: kv.Version, Lease: kv.Lease}
		got := appendKeyValue(nil, ours)
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: encoded %x, proto.Marshal %x", kv, got, want)
		}
		if n := keyValueSize(ours); n != len(want) {
			t.Fatalf("%v: size %d, encoded %d", kv, n, len(want))
		}
		if key, id := keyAndLease(want); !bytes.Equal(key, kv.Key) || id != kv.Lease {
			t.Fatalf("%v: read key %q lease %d", kv, key, id)
		}
	}
}
