package files

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/etcdkit/etcdkit/validate/internal/wire"
)

// SnapshotRecord is a WAL snapshot record (etcd's walpb.Snapshot): the
// raft index and term whose snap file etcd loads at start.
type SnapshotRecord struct {
	Index, Term uint64
}

// CheckSnaps loads every snap file and checks each as etcd's snap.Read
// does (not empty, its CRC, a raft snapshot inside), and that the WAL's
// newest snapshot record has its file, without which etcd cannot start.
// It returns the file at fault.
func CheckSnaps(dir string, newest *SnapshotRecord) (file string, err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	if err != nil {
		return dir, err
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return name, fmt.Errorf("snap %s: %w", name, err)
		}
		if err := checkSnap(b); err != nil {
			return name, fmt.Errorf("snap %s: %w", name, err)
		}
	}
	if newest != nil {
		want := filepath.Join(dir, fmt.Sprintf("%016x-%016x.snap", newest.Term, newest.Index))
		if _, err := os.Stat(want); err != nil {
			return want, fmt.Errorf("snap %s: the WAL's newest snapshot record (index %d) has no snap file: %w", want, newest.Index, err)
		}
	}
	return "", nil
}

// errEmptySnap and errSnapCRC are etcd's words for the two checks of its
// own that a snap file fails.
var (
	errEmptySnap = errors.New("empty snapshot")
	errSnapCRC   = errors.New("crc mismatch")
)

// checkSnap reads a snap file (etcd's snappb.Snapshot: crc = 1, data = 2)
// and the raft snapshot in it (raftpb.Snapshot: data = 1, metadata = 2,
// whose conf_state = 1, index = 2, term = 3), decoded here so that a
// data dir's check needs no etcd server packages. As etcd's unmarshalling
// does, it takes a known field of another wire type for an unknown one,
// and fails on what does not parse.
func checkSnap(b []byte) error {
	if len(b) == 0 {
		return errEmptySnap
	}
	var (
		crc  uint64
		data []byte
	)
	err := fields(b, func(num wire.Number, typ wire.Type, v uint64, bytes []byte) error {
		switch {
		case num == 1 && typ == wire.VarintType:
			crc = v
		case num == 2 && typ == wire.BytesType:
			data = bytes
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("snap file: %w", err)
	}
	if len(data) == 0 || uint32(crc) == 0 {
		return errEmptySnap
	}
	if crc32.Update(0, castagnoli, data) != uint32(crc) {
		return errSnapCRC
	}
	if err := message(data, map[wire.Number]func([]byte) error{
		2: func(metadata []byte) error {
			return message(metadata, map[wire.Number]func([]byte) error{1: confState})
		},
	}); err != nil {
		return fmt.Errorf("raft snapshot: %w", err)
	}
	return nil
}

// message walks a message whose embedded messages are the fields of
// nested, each checked by its own function.
func message(b []byte, nested map[wire.Number]func([]byte) error) error {
	return fields(b, func(num wire.Number, typ wire.Type, _ uint64, bytes []byte) error {
		if check := nested[num]; check != nil && typ == wire.BytesType {
			return check(bytes)
		}
		return nil
	})
}

// confState checks a raftpb.ConfState: its four lists of member IDs
// (fields 1 to 4) come packed or one varint at a time.
func confState(b []byte) error {
	return fields(b, func(num wire.Number, typ wire.Type, _ uint64, packed []byte) error {
		if num > 4 || typ != wire.BytesType {
			return nil
		}
		for len(packed) > 0 {
			_, n := wire.ConsumeVarint(packed)
			if n < 0 {
				return wire.ParseError(n)
			}
			packed = packed[n:]
		}
		return nil
	})
}

// fields walks a message's fields, giving each with its varint value or
// its bytes (with each nil, only checks that they parse); a field that
// does not parse is an error.
func fields(b []byte, each func(num wire.Number, typ wire.Type, v uint64, bytes []byte) error) error {
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
		if n < 0 {
			return wire.ParseError(n)
		}
		b = b[n:]
		var (
			v     uint64
			bytes []byte
		)
		switch typ {
		case wire.VarintType:
			v, n = wire.ConsumeVarint(b)
		case wire.BytesType:
			bytes, n = wire.ConsumeBytes(b)
		default:
			n = wire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return wire.ParseError(n)
		}
		b = b[n:]
		if each == nil {
			continue
		}
		if err := each(num, typ, v, bytes); err != nil {
			return err
		}
	}
	return nil
}
