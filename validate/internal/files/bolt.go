package files

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

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
	// Opening a FIFO would block until a writer comes.
	if info, err := os.Stat(path); err != nil {
		return err
	} else if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", path, info.Mode().Type())
	}
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
//
// This walk stands in for bbolt's tx.Check, which panics inside a
// goroutine of its own, where no recover reaches, on a page it cannot
// read; what that check adds beyond the trees is the freelist, which etcd
// does not write (NoFreelistSync) and rebuilds at open.
//
// The file is mapped, not read: the walk touches page headers and keys,
// and a value is only checked to lie inside its page run, so most of a
// database of large values is never paged in.
func WalkPages(path string) error {
	return withMapped(path, func(data []byte) error { return walk(data, nil) })
}

// Reachable lists the pages WalkPages reads and their types (0x01 branch,
// 0x02 leaf): what a damage test must hit to be noticed.
func Reachable(path string) (map[uint64]uint16, error) {
	seen := map[uint64]uint16{}
	err := withMapped(path, func(data []byte) error { return walk(data, seen) })
	return seen, err
}

// walk checks the trees of the bbolt file held in data.
func walk(data []byte, seen map[uint64]uint16) error {
	w := &walker{data: data, pageSize: defaultBoltPge, visited: map[uint64]bool{}, seen: seen}
	if len(data) >= metaPageSize+4 {
		if v := uint64(binary.LittleEndian.Uint32(data[metaPageSize:])); v >= 512 && v <= 1<<16 {
			w.pageSize = v
		}
	}
	w.pages = uint64(len(data)) / w.pageSize
	var root, txid uint64
	found := false
	for i := range uint64(2) {
		b := data[min(uint64(len(data)), i*w.pageSize):]
		if len(b) < minMetaRead || binary.LittleEndian.Uint32(b[metaOffset:]) != boltMagic {
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

type walker struct {
	data     []byte
	pageSize uint64
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
	buf := w.data[id*w.pageSize : (id+1)*w.pageSize]
	if got := binary.LittleEndian.Uint64(buf); got != id {
		return fmt.Errorf("page %d names itself page %d", id, got)
	}
	if overflow := uint64(binary.LittleEndian.Uint32(buf[12:])); overflow > 0 {
		if overflow >= w.pages-id {
			return fmt.Errorf("page %d runs past the end of the file", id)
		}
		buf = w.data[id*w.pageSize : (id+1+overflow)*w.pageSize]
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
