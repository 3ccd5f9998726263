package database

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// KeyValue is a value of the key bucket: the key as a revision left it,
// etcd's mvccpb.KeyValue read from its protobuf wire form.
type KeyValue struct {
	Key            []byte
	CreateRevision int64
	ModRevision    int64
	Version        int64
	Value          []byte
	Lease          int64
}

// DecodeKeyValue reads a key bucket's value. Fields it does not know are
// skipped, as protobuf's own decoder skips them; what does not parse is an
// error.
func DecodeKeyValue(b []byte) (KeyValue, error) {
	var kv KeyValue
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return KeyValue{}, errors.New("key value: a broken field tag")
		}
		b = b[n:]
		field, wire := tag>>3, tag&7
		switch wire {
		case 0: // varint
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return KeyValue{}, fmt.Errorf("key value: field %d: a broken varint", field)
			}
			b = b[n:]
			switch field {
			case 2:
				kv.CreateRevision = int64(v)
			case 3:
				kv.ModRevision = int64(v)
			case 4:
				kv.Version = int64(v)
			case 6:
				kv.Lease = int64(v)
			}
		case 2: // bytes
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return KeyValue{}, fmt.Errorf("key value: field %d: a length past the value's end", field)
			}
			v := b[n : n+int(l)]
			b = b[n+int(l):]
			switch field {
			case 1:
				kv.Key = v
			case 5:
				kv.Value = v
			}
		case 1: // fixed64
			if len(b) < 8 {
				return KeyValue{}, fmt.Errorf("key value: field %d: truncated", field)
			}
			b = b[8:]
		case 5: // fixed32
			if len(b) < 4 {
				return KeyValue{}, fmt.Errorf("key value: field %d: truncated", field)
			}
			b = b[4:]
		default:
			return KeyValue{}, fmt.Errorf("key value: field %d: wire type %d is not one etcd writes", field, wire)
		}
	}
	return kv, nil
}
