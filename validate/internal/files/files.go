package files

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// WAL is what reading the WAL found.
type WAL struct {
	// Unapplied counts the log entries past the database's consistent
	// index: each adds at most one revision when etcd applies it at start.
	Unapplied int64
	// Snapshot is the newest snapshot record, nil when there is none.
	Snapshot *walpb.Snapshot
	// Torn: the last record is cut short, as a killed member leaves it;
	// etcd repairs that, so it is no damage.
	Torn bool
}

// ReadWAL decodes every record of every WAL file in one pass, checking
// the CRC chain, and counts the entries past the database's consistent
// index from the log's last entry: raft log indexes are contiguous, and an
// entry rewritten by a new leader is followed by its successors. Only an
// entry's index is read, not its data, so memory does not grow with the
// WAL.
func ReadWAL(dir string, cindex uint64) (w WAL, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("wal %s: %v", dir, p)
		}
	}()
	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		return w, err
	}
	if len(names) == 0 {
		return w, fmt.Errorf("wal %s: no WAL files", dir)
	}
	slices.Sort(names)
	readers := make([]fileutil.FileReader, 0, len(names))
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return w, fmt.Errorf("wal %s: %w", name, err)
		}
		defer func() { _ = f.Close() }()
		readers = append(readers, fileutil.NewFileReader(f))
	}
	dec := wal.NewDecoder(readers...)
	rec := &walpb.Record{}
	var last uint64
	for {
		err := dec.Decode(rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			w.Torn = true
			break
		}
		if err != nil {
			return w, fmt.Errorf("wal %s: %w", dir, err)
		}
		switch rec.GetType() {
		case wal.CrcType:
			if crc := dec.LastCRC(); crc != 0 && rec.Validate(crc) != nil {
				return w, fmt.Errorf("wal %s: %w at offset %d", dir, wal.ErrCRCMismatch, dec.LastOffset())
			}
			dec.UpdateCRC(rec.GetCrc())
		case wal.SnapshotType:
			snap := &walpb.Snapshot{}
			if err := proto.Unmarshal(rec.GetData(), snap); err != nil {
				return w, fmt.Errorf("wal %s: snapshot record: %w", dir, err)
			}
			if snap.GetIndex() > 0 {
				w.Snapshot = snap
			}
		case wal.EntryType:
			index, err := entryIndex(rec.GetData())
			if err != nil {
				return w, fmt.Errorf("wal %s: entry record at offset %d: %w", dir, dec.LastOffset(), err)
			}
			last = index
		}
	}
	if last > cindex {
		w.Unapplied = int64(last - cindex)
	}
	return w, nil
}

// entryIndex reads the index (field 3) of a raftpb.Entry without
// unmarshalling its data.
func entryIndex(b []byte) (uint64, error) {
	var index uint64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
		if num == 3 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, protowire.ParseError(n)
			}
			index, b = v, b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return index, nil
}

// CheckSnaps loads every snap file (each carries a CRC) and checks that
// the WAL's newest snapshot record has its file, without which etcd cannot
// start. It returns the file at fault.
func CheckSnaps(dir string, newest *walpb.Snapshot) (file string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("snap %s: %v", file, p)
		}
	}()
	names, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	if err != nil {
		return dir, err
	}
	for _, name := range names {
		file = name
		if _, err := snap.Read(zap.NewNop(), name); err != nil {
			return name, fmt.Errorf("snap %s: %w", name, err)
		}
	}
	if newest != nil {
		want := filepath.Join(dir, fmt.Sprintf("%016x-%016x.snap", newest.GetTerm(), newest.GetIndex()))
		if _, err := os.Stat(want); err != nil {
			return want, fmt.Errorf("snap %s: the WAL's newest snapshot record (index %d) has no snap file: %w", want, newest.GetIndex(), err)
		}
	}
	return "", nil
}

// bbolt's meta page layout, after the 16-byte page header.
const (
	boltMagic      = 0xED0CDAED
	metaOffset     = 16
	metaPageSize   = metaOffset + 8  // magic, version, then the page size
	metaHighWater  = metaOffset + 40 // pgid: the pages in use
	metaTxID       = metaOffset + 48
	minMetaRead    = metaOffset + 64
	defaultBoltPge = 4096
)

// CheckLength reads both meta pages and fails when the file is shorter
// than the newest valid one's high-water mark, or neither is valid.
func CheckLength(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	var need, txid uint64
	valid := false
	pageSize := int64(defaultBoltPge)
	for i := range int64(2) {
		b := make([]byte, minMetaRead)
		if _, err := f.ReadAt(b, i*pageSize); err != nil {
			continue
		}
		if binary.LittleEndian.Uint32(b[metaOffset:]) != boltMagic {
			continue
		}
		if i == 0 {
			if ps := int64(binary.LittleEndian.Uint32(b[metaPageSize:])); ps >= 512 && ps <= 1<<16 {
				pageSize = ps
			}
		}
		if t := binary.LittleEndian.Uint64(b[metaTxID:]); !valid || t > txid {
			txid, need, valid = t, binary.LittleEndian.Uint64(b[metaHighWater:])*uint64(pageSize), true
		}
	}
	if !valid {
		return errors.New("neither meta page holds a bbolt header")
	}
	if uint64(info.Size()) < need {
		return fmt.Errorf("truncated: %d bytes, its meta page says %d are in use", info.Size(), need)
	}
	return nil
}

// bbolt's page layout: a 16-byte header (id uint64, flags uint16, count
// uint16, overflow uint32), then 16-byte elements.
const (
	pageHeaderSize = 16
	elementSize    = 16
	branchPage     = 0x01
	leafPage       = 0x02
	bucketLeafFlag = 0x01
	metaRoot       = metaOffset + 16 // the root bucket's page
)

// WalkPages visits every page reachable from the newest meta page — the
// root bucket and each bucket's tree, inline buckets included — and checks
// that each names itself, has the type its parent expects, and points only
// at pages inside the file. Free pages hold stale data and are not read.
func WalkPages(path string) error { return walkPagesWith(path, nil) }

func walkPagesWith(path string, seen map[uint64]uint16) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	w := &walker{f: f, pageSize: defaultBoltPge, visited: map[uint64]bool{}, seen: seen}
	ps := make([]byte, 4)
	if _, err := f.ReadAt(ps, metaPageSize); err == nil {
		if v := int64(binary.LittleEndian.Uint32(ps)); v >= 512 && v <= 1<<16 {
			w.pageSize = v
		}
	}
	w.pages = uint64(info.Size() / w.pageSize)
	var root, txid uint64
	found := false
	for i := range int64(2) {
		b := make([]byte, minMetaRead)
		if _, err := f.ReadAt(b, i*w.pageSize); err != nil || binary.LittleEndian.Uint32(b[metaOffset:]) != boltMagic {
			continue
		}
		if t := binary.LittleEndian.Uint64(b[metaTxID:]); !found || t > txid {
			root, txid, found = binary.LittleEndian.Uint64(b[metaRoot:]), t, true
		}
	}
	if !found {
		return errors.New("neither meta page holds a bbolt header")
	}
	return w.page(root, 0)
}

// Reachable lists the pages WalkPages reads and their types (0x01 branch,
// 0x02 leaf): what a damage test must hit to be noticed.
func Reachable(path string) (map[uint64]uint16, error) {
	seen := map[uint64]uint16{}
	err := walkPagesWith(path, seen)
	return seen, err
}

type walker struct {
	f        *os.File
	pageSize int64
	pages    uint64
	visited  map[uint64]bool
	// seen, when not nil, records each page read and its type.
	seen map[uint64]uint16
	// nodes counts the nodes read: a damaged file can make inline buckets
	// point into each other, and the walk must end anyway.
	nodes int
}

func (w *walker) page(id uint64, depth int) error {
	if id < 2 || id >= w.pages {
		return fmt.Errorf("a page points at page %d, outside the file's %d pages", id, w.pages)
	}
	if w.visited[id] || depth > 64 {
		return fmt.Errorf("page %d is reached twice: the tree has a cycle", id)
	}
	w.visited[id] = true
	// One read for the page, a second only for an overflow run.
	buf := make([]byte, w.pageSize)
	if _, err := w.f.ReadAt(buf, int64(id)*w.pageSize); err != nil {
		return fmt.Errorf("page %d: %w", id, err)
	}
	if got := binary.LittleEndian.Uint64(buf); got != id {
		return fmt.Errorf("page %d names itself page %d", id, got)
	}
	if overflow := uint64(binary.LittleEndian.Uint32(buf[12:])); overflow > 0 {
		if id+overflow >= w.pages {
			return fmt.Errorf("page %d runs past the end of the file", id)
		}
		buf = append(buf, make([]byte, int64(overflow)*w.pageSize)...)
		if _, err := w.f.ReadAt(buf[w.pageSize:], int64(id+1)*w.pageSize); err != nil {
			return fmt.Errorf("page %d: %w", id, err)
		}
	}
	if w.seen != nil {
		w.seen[id] = binary.LittleEndian.Uint16(buf[8:])
	}
	return w.node(id, buf, depth)
}

// node checks one branch or leaf page held in buf (a page of the file or
// an inline bucket's) and descends into what it points at.
func (w *walker) node(id uint64, buf []byte, depth int) error {
	w.nodes++
	if depth > 64 || uint64(w.nodes) > 2*w.pages+1024 {
		return fmt.Errorf("page %d: buckets nest deeper or more often than the file has pages", id)
	}
	if len(buf) < pageHeaderSize {
		return fmt.Errorf("page %d: an inline bucket too short for its header", id)
	}
	flags := binary.LittleEndian.Uint16(buf[8:])
	count := int(binary.LittleEndian.Uint16(buf[10:]))
	if pageHeaderSize+count*elementSize > len(buf) {
		return fmt.Errorf("page %d: %d elements do not fit", id, count)
	}
	var prev []byte
	for i := range count {
		e := buf[pageHeaderSize+i*elementSize:]
		var key []byte
		var err error
		switch flags {
		case branchPage:
			pos, ksize := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
			if key, err = slice(buf, pageHeaderSize+i*elementSize, pos, ksize); err != nil {
				return fmt.Errorf("page %d, element %d: %w", id, i, err)
			}
			if err := w.page(binary.LittleEndian.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
		case leafPage:
			eflags, pos := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
			ksize, vsize := binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
			if key, err = slice(buf, pageHeaderSize+i*elementSize, pos, ksize); err != nil {
				return fmt.Errorf("page %d, element %d: %w", id, i, err)
			}
			if eflags&bucketLeafFlag != 0 {
				value, err := slice(buf, pageHeaderSize+i*elementSize, pos+ksize, vsize)
				if err != nil {
					return fmt.Errorf("page %d, element %d: bucket header: %w", id, i, err)
				}
				if len(value) < 16 {
					return fmt.Errorf("page %d, element %d: a bucket header of %d bytes", id, i, len(value))
				}
				if root := binary.LittleEndian.Uint64(value); root != 0 {
					err = w.page(root, depth+1)
				} else if len(value) > 16+pageHeaderSize {
					err = w.node(id, value[16:], depth+1)
				}
				if err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("page %d has type %#x where a branch or leaf page belongs", id, flags)
		}
		if prev != nil && string(key) <= string(prev) {
			return fmt.Errorf("page %d: keys out of order at element %d", id, i)
		}
		prev = key
	}
	return nil
}

// slice is the n bytes at pos past the element at elem, inside buf.
func slice(buf []byte, elem int, pos, n uint32) ([]byte, error) {
	start := uint64(elem) + uint64(pos)
	if end := start + uint64(n); end > uint64(len(buf)) {
		return nil, fmt.Errorf("element data %d-%d lies outside its page", start, end)
	}
	return buf[start : start+uint64(n)], nil
}
