package files

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/etcdkit/etcdkit/validate/internal/wire"
)

// WAL is what reading the WAL found.
type WAL struct {
	// Unapplied counts the log entries past the database's consistent
	// index: each adds at most one revision when etcd applies it at start.
	Unapplied int64
	// Snapshot is the newest snapshot record, nil when there is none.
	Snapshot *SnapshotRecord
	// Torn: the last file's last record is cut short, as a killed member
	// leaves it; etcd repairs that at start, so it is no damage.
	Torn bool
	// Foreign counts the entries etcd replays at start that an etcd 3.5
	// member wrote in their v2 form: etcd 3.7 and later panic on them.
	// FirstForeign is the first one's index. V2Custom counts those of them
	// that write the v2 store itself rather than the membership (a
	// member's attributes, the cluster version): etcd 3.6 panics on those.
	Foreign      int64
	FirstForeign uint64
	V2Custom     int64
	// MemberID and ClusterID are what the WAL's metadata says this
	// member and its cluster are.
	MemberID, ClusterID uint64
}

// The WAL's record types (etcd's wal package) and its CRC polynomial.
const (
	metadataType = 1
	entryType    = 2
	crcType      = 4
	snapshotType = 5
	sectorSize   = 512
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ReadWAL counts the entries past the database's consistent index from
// the log's last entry: raft log indexes are contiguous, and an entry
// rewritten by a new leader is followed by its successors. whole reads
// every file, checking the sequence of names and the CRC chain across
// them; otherwise only the last file is read, which is enough to find the
// last entry and costs at most one segment (64 MiB) whatever the WAL's size.
//
// This is our own decoder rather than etcd's: it reads an entry's index
// without unmarshalling the entry, and reuses one buffer, so it runs at
// the speed of the CRC instead of the allocator. Its verdicts match
// etcd's decoder, which the tests check.
func ReadWAL(dir string, cindex uint64, whole bool) (WAL, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		return WAL{}, fmt.Errorf("wal %s: %w", dir, err)
	}
	if len(names) == 0 {
		return WAL{}, fmt.Errorf("wal %s: no WAL files", dir)
	}
	slices.Sort(names)
	if err := checkSequence(names); err != nil {
		return WAL{}, fmt.Errorf("wal %s: %w", dir, err)
	}
	d := &walDecoder{}
	if !whole {
		names = names[len(names)-1:]
		// A segment that holds no entry yet ends where its name says the
		// log stood when it was cut.
		var seq uint64
		if _, err := fmt.Sscanf(filepath.Base(names[0]), "%016x-%016x.wal", &seq, &d.last); err == nil && d.last > 0 {
			d.last--
		}
	}
	for i, name := range names {
		if err := d.file(name, i == len(names)-1); err != nil {
			return WAL{}, fmt.Errorf("wal %s: %w", name, err)
		}
	}
	w := WAL{Snapshot: d.snapshot, Torn: d.torn, MemberID: d.meta.nodeID, ClusterID: d.meta.clusterID}
	// etcd replays only the entries past the newest snapshot: those
	// before it are in the database already, however old the segment
	// that still holds them (segments go only when a newer one is full).
	for _, e := range d.v2 {
		if d.snapshot != nil && e.index <= d.snapshot.Index {
			continue
		}
		if e.foreign && w.Foreign == 0 {
			w.FirstForeign = e.index
		}
		if e.foreign {
			w.Foreign++
		}
		if e.custom {
			w.V2Custom++
		}
	}
	if d.last > cindex {
		w.Unapplied = int64(d.last - cindex)
	}
	return w, nil
}

// checkSequence fails when a segment is missing: their names carry
// consecutive sequence numbers.
func checkSequence(names []string) error {
	for i, name := range names {
		var seq, index uint64
		if _, err := fmt.Sscanf(filepath.Base(name), "%016x-%016x.wal", &seq, &index); err != nil {
			return fmt.Errorf("%s is not a WAL segment's name", filepath.Base(name))
		}
		if i > 0 {
			var prev uint64
			_, _ = fmt.Sscanf(filepath.Base(names[i-1]), "%016x", &prev)
			if seq != prev+1 {
				return fmt.Errorf("segment %d is missing: %s follows %s", prev+1, filepath.Base(name), filepath.Base(names[i-1]))
			}
		}
	}
	return nil
}

type walDecoder struct {
	crc      uint32
	last     uint64
	snapshot *SnapshotRecord
	torn     bool
	buf      []byte
	// v2 are the entries of v2 requests, by index, until the newest
	// snapshot says which of them etcd replays.
	v2   []v2Entry
	meta metadata
}

// v2Entry is an entry of a v2 request (classify): foreign, in etcd 3.5's
// v2 form; custom, writing the v2 store rather than the membership.
type v2Entry struct {
	index           uint64
	foreign, custom bool
}

func (d *walDecoder) file(name string, lastFile bool) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	return d.decode(bufio.NewReaderSize(f, 1<<20), info.Size(), lastFile)
}

// decode reads one segment of size bytes. Its frames are a little-endian
// length — the record's size in the low 56 bits, the padding in the top
// byte when its high bit is set — then the record and its padding. A zero
// length is the preallocated tail.
//
//nolint:gocyclo // a decision table: one case per WAL record type and per way a record is torn, as etcd's own decoder reads them
func (d *walDecoder) decode(r io.Reader, size int64, lastFile bool) error {
	var frame [8]byte
	for off := int64(0); ; {
		if _, err := io.ReadFull(r, frame[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return d.tear(lastFile, off, "its last frame's length is cut short")
		}
		l := binary.LittleEndian.Uint64(frame[:])
		if l == 0 {
			return nil
		}
		n, pad := int64(l&^(0xff<<56)), int64(0)
		if l&(1<<63) != 0 {
			pad = int64((l >> 56) & 0x7)
		}
		if n > size-off-8-pad {
			return d.tear(lastFile, off, fmt.Sprintf("a record of %d bytes runs past the end of the file", n))
		}
		if int64(cap(d.buf)) < n+pad {
			d.buf = make([]byte, n+pad)
		}
		data := d.buf[:n+pad]
		if _, err := io.ReadFull(r, data); err != nil {
			return d.tear(lastFile, off, "its last record is cut short")
		}
		typ, crc, payload, err := parseRecord(data[:n])
		if err != nil {
			if lastFile && tornWrite(data, off+8) {
				return d.tear(true, off, "")
			}
			return fmt.Errorf("record at offset %d: %w", off, err)
		}
		if typ == crcType {
			if d.crc != 0 && crc != d.crc {
				return fmt.Errorf("record at offset %d: the CRC chain breaks: the segment starts at %#08x, the previous one ended at %#08x", off, crc, d.crc)
			}
			d.crc = crc
		} else {
			d.crc = crc32.Update(d.crc, castagnoli, payload)
			if crc != d.crc {
				if lastFile && tornWrite(data, off+8) {
					return d.tear(true, off, "")
				}
				return fmt.Errorf("record at offset %d: CRC mismatch", off)
			}
		}
		switch typ {
		case entryType:
			index, normal, data, err := entryFields(payload)
			if err != nil {
				return fmt.Errorf("entry at offset %d: %w", off, err)
			}
			// An entry a new leader rewrote replaces the old one and
			// those after it.
			for len(d.v2) > 0 && d.v2[len(d.v2)-1].index >= index {
				d.v2 = d.v2[:len(d.v2)-1]
			}
			if normal && len(data) > 0 {
				if foreign, custom := classify(data); foreign || custom {
					d.v2 = append(d.v2, v2Entry{index: index, foreign: foreign, custom: custom})
				}
			}
			// A new leader may rewrite the log's tail, so an index can go
			// back; it skips ahead only past a snapshot (below).
			if d.last != 0 && index > d.last+1 {
				return fmt.Errorf("entry at offset %d: index %d follows %d", off, index, d.last)
			}
			d.last = index
		case metadataType:
			m, err := readMetadata(payload)
			if err != nil {
				return fmt.Errorf("metadata record at offset %d: %w", off, err)
			}
			d.meta = m
		case snapshotType:
			var s SnapshotRecord
			err := fields(payload, func(num wire.Number, typ wire.Type, v uint64, b []byte) error {
				switch {
				case num == 1 && typ == wire.VarintType:
					s.Index = v
				case num == 2 && typ == wire.VarintType:
					s.Term = v
				case num == 3 && typ == wire.BytesType:
					return confState(b)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("snapshot record at offset %d: %w", off, err)
			}
			if s.Index > 0 {
				d.snapshot = &s
			}
			// The leader's snapshot, applied by a follower that fell
			// behind: its log goes on after the snapshot's index. (A
			// member's own snapshot is behind its log, which goes on.)
			d.last = max(d.last, s.Index)
		}
		off += 8 + n + pad
	}
}

// tear ends the segment at a torn record when it is the last segment,
// where a crash leaves one and etcd's repair truncates it; anywhere else
// it is damage.
func (d *walDecoder) tear(lastFile bool, off int64, why string) error {
	if lastFile {
		d.torn = true
		return nil
	}
	return fmt.Errorf("record at offset %d: %s, and this is not the last segment", off, why)
}

// tornWrite says whether a record that failed its checks was torn: a
// sector of it, as the disk wrote sectors, is all zeros. This is how
// etcd's decoder tells a crash from damage.
func tornWrite(data []byte, fileOff int64) bool {
	for len(data) > 0 {
		n := min(int(sectorSize-fileOff%sectorSize), len(data))
		zero := true
		for _, b := range data[:n] {
			if b != 0 {
				zero = false
				break
			}
		}
		if zero {
			return true
		}
		data, fileOff = data[n:], fileOff+int64(n)
	}
	return false
}

// parseRecord reads a walpb.Record (type = 1, crc = 2, data = 3) without
// copying its data.
func parseRecord(b []byte) (typ int64, crc uint32, data []byte, err error) {
	for len(b) > 0 {
		num, wt, n := wire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, nil, wire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && wt == wire.VarintType:
			v, n := wire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, nil, wire.ParseError(n)
			}
			typ, b = int64(v), b[n:]
		case num == 2 && wt == wire.VarintType:
			v, n := wire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, nil, wire.ParseError(n)
			}
			crc, b = uint32(v), b[n:]
		case num == 3 && wt == wire.BytesType:
			v, n := wire.ConsumeBytes(b)
			if n < 0 {
				return 0, 0, nil, wire.ParseError(n)
			}
			data, b = v, b[n:]
		default:
			n := wire.ConsumeFieldValue(num, wt, b)
			if n < 0 {
				return 0, 0, nil, wire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return typ, crc, data, nil
}

// entryFields reads the index (field 3), type (1) and data (4) of a
// raftpb.Entry without unmarshalling it.
func entryFields(b []byte) (index uint64, normal bool, data []byte, err error) {
	normal = true
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
		if n < 0 {
			return 0, false, nil, wire.ParseError(n)
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 3) && typ == wire.VarintType:
			v, n := wire.ConsumeVarint(b)
			if n < 0 {
				return 0, false, nil, wire.ParseError(n)
			}
			if num == 3 {
				index = v
			} else {
				normal = v == 0 // raftpb.EntryNormal
			}
			b = b[n:]
			continue
		case num == 4 && typ == wire.BytesType:
			v, n := wire.ConsumeBytes(b)
			if n < 0 {
				return 0, false, nil, wire.ParseError(n)
			}
			data, b = v, b[n:]
			continue
		}
		n = wire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, false, nil, wire.ParseError(n)
		}
		b = b[n:]
	}
	return index, normal, data, nil
}

// applies says whether this etcd can apply a normal entry's request, as
// etcd's apply reads it: it panics on a request that does not unmarshal
// or carries neither an ID nor a header (an etcd 3.5 member's v2
// request). Every request etcd 3.6 and later writes has a header (field
// 100), found without unmarshalling; only the others are read whole.
func applies(data []byte) bool {
	if hasHeader(data) {
		return true
	}
	var id uint64
	header := false
	// InternalRaftRequest: ID = 1, the header = 100, every other field a
	// request message. As protobuf's unmarshalling, a known field of
	// another wire type is taken for an unknown one, and what does not
	// parse, at the top or in a request, fails.
	err := fields(data, func(num wire.Number, typ wire.Type, v uint64, b []byte) error {
		switch {
		case num == 1 && typ == wire.VarintType:
			id = v
		case num == 100 && typ == wire.BytesType:
			header = true
			return fields(b, nil)
		case typ == wire.BytesType && num != 1:
			return fields(b, nil)
		}
		return nil
	})
	return err == nil && (id != 0 || header)
}

// metadata is etcdserverpb.Metadata: NodeID = 1, ClusterID = 2.
type metadata struct{ nodeID, clusterID uint64 }

func readMetadata(b []byte) (metadata, error) {
	var m metadata
	err := fields(b, func(num wire.Number, typ wire.Type, v uint64, _ []byte) error {
		switch {
		case num == 1 && typ == wire.VarintType:
			m.nodeID = v
		case num == 2 && typ == wire.VarintType:
			m.clusterID = v
		}
		return nil
	})
	return m, err
}

// classify says whether a normal entry's request is in etcd 3.5's v2 form
// (foreign: etcd 3.7 panics on it), and whether it is a v2 request that
// writes the v2 store rather than the membership (custom: etcd 3.6 panics
// on it), bare or carried in an InternalRaftRequest's v2 field.
func classify(data []byte) (foreign, custom bool) {
	if !applies(data) {
		return true, !v2Membership(data)
	}
	if hasHeader(data) {
		return false, false
	}
	if method, _, nested := v2Fields(data); nested != nil && !httpMethods[method] {
		if inner, _, _ := v2Fields(nested); httpMethods[inner] {
			return false, !v2Membership(nested)
		}
	}
	return false, false
}

// hasHeader says whether a request carries a header (field 100), as
// every request etcd 3.6 and later writes does.
func hasHeader(data []byte) bool {
	for b := data; len(b) > 0; {
		num, typ, n := wire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == 100 && typ == wire.BytesType {
			return true
		}
		if n = wire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
	}
	return false
}

// v2Membership says whether a v2 Request (method field 2, path field 3)
// only sets the membership, which etcd 3.6 still applies (as its
// v2ToV3Request does): a PUT of a member's attributes or of the cluster
// version.
func v2Membership(data []byte) bool {
	method, path, _ := v2Fields(data)
	if method != "PUT" {
		return false
	}
	if path == "/0/version" {
		return true
	}
	id, ok := strings.CutPrefix(path, "/0/members/")
	id, ok2 := strings.CutSuffix(id, "/attributes")
	_, err := strconv.ParseUint(id, 16, 64)
	return ok && ok2 && err == nil
}

// httpMethods are the methods a v2 Request carries.
var httpMethods = map[string]bool{"PUT": true, "POST": true, "DELETE": true, "GET": true, "QGET": true, "HEAD": true, "SYNC": true}

// v2Fields reads fields 2 and 3 of a message as strings; nested is field
// 2's bytes, which may be a message of its own.
func v2Fields(b []byte) (method, path string, nested []byte) {
	for len(b) > 0 {
		num, typ, n := wire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if (num == 2 || num == 3) && typ == wire.BytesType {
			v, n := wire.ConsumeBytes(b)
			if n < 0 {
				return
			}
			if num == 2 {
				method, nested = string(v), v
			} else {
				path = string(v)
			}
			b = b[n:]
			continue
		}
		if n = wire.ConsumeFieldValue(num, typ, b); n < 0 {
			return
		}
		b = b[n:]
	}
	return
}
