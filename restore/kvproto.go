package restore

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/etcdkit/etcdkit/snapshot"
)

// The fields of mvccpb.KeyValue (api/mvccpb/kv.proto).
const (
	kvKeyField       protowire.Number = 1
	kvCreateRevision protowire.Number = 2
	kvModRevision    protowire.Number = 3
	kvVersion        protowire.Number = 4
	kvValue          protowire.Number = 5
	kvLease          protowire.Number = 6
)

// appendKeyValue appends kv as proto.Marshal encodes it, byte for byte
// (fields in number order, zero values left out): the replay writes half
// a million of them a second, and the generic marshaller allocates and
// costs several times more. TestKeyValueEncodingIsProtos holds it to
// proto.Marshal.
func appendKeyValue(b []byte, kv *snapshot.KeyValue) []byte {
	if len(kv.Key) > 0 {
		b = protowire.AppendTag(b, kvKeyField, protowire.BytesType)
		b = protowire.AppendBytes(b, kv.Key)
	}
	for _, f := range []struct {
		n protowire.Number
		v int64
	}{{kvCreateRevision, kv.CreateRevision}, {kvModRevision, kv.ModRevision}, {kvVersion, kv.Version}} {
		if f.v != 0 {
			b = protowire.AppendTag(b, f.n, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(f.v))
		}
	}
	if len(kv.Value) > 0 {
		b = protowire.AppendTag(b, kvValue, protowire.BytesType)
		b = protowire.AppendBytes(b, kv.Value)
	}
	if kv.Lease != 0 {
		b = protowire.AppendTag(b, kvLease, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(kv.Lease))
	}
	return b
}

// keyValueSize is the length appendKeyValue appends.
func keyValueSize(kv *snapshot.KeyValue) int {
	n := 0
	if len(kv.Key) > 0 {
		n += 1 + protowire.SizeBytes(len(kv.Key))
	}
	for _, v := range []int64{kv.CreateRevision, kv.ModRevision, kv.Version} {
		if v != 0 {
			n += 1 + protowire.SizeVarint(uint64(v))
		}
	}
	if len(kv.Value) > 0 {
		n += 1 + protowire.SizeBytes(len(kv.Value))
	}
	if kv.Lease != 0 {
		n += 1 + protowire.SizeVarint(uint64(kv.Lease))
	}
	return n
}

// keyAndLease reads the key and the lease of an encoded KeyValue without
// copying its value. A malformed one reads as far as it goes.
func keyAndLease(b []byte) (key []byte, id int64) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return key, id
		}
		b = b[n:]
		switch {
		case num == kvKeyField && typ == protowire.BytesType:
			key, n = protowire.ConsumeBytes(b)
		case num == kvLease && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			id = int64(v)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return key, id
		}
		b = b[n:]
	}
	return key, id
}
