package database

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"sort"
)

// bbolt's layout, version 2: every page begins with a 16-byte header (id,
// flags, element count, overflow pages); the elements follow, 16 bytes
// each, pointing at their keys and values by an offset from the element.
const (
	headerSize  = 16
	elementSize = 16
	metaSize    = 64

	branchPage = 0x01
	leafPage   = 0x02
	metaPage   = 0x04

	bucketLeaf = 0x01

	magic   = 0xED0CDAED
	version = 2

	// maxDepth bounds a walk from a root to a leaf: a B+tree of 2^64 pages
	// is shallower, so a deeper one loops through damaged pages.
	maxDepth = 64
)

// ErrDamaged marks a database whose pages do not hold together.
var ErrDamaged = errors.New("damaged")

// DB is an etcd database file open for reading.
type DB struct {
	f        *os.File
	path     string
	size     int64
	pageSize int
	pages    uint64 // the high-water mark: no page id is at or past it
	root     Bucket
	cache    map[uint64][]byte
	unlock   func()
}

// Open opens the database at path for reading, taking a shared lock on it
// where the system has one, as bbolt's readers do: a database that a
// running etcd holds open is refused, not read while it changes.
func Open(path string) (*DB, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	db := &DB{f: f, path: path, cache: map[uint64][]byte{}}
	if db.unlock, err = lockShared(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("database %s: %w", path, err)
	}
	db.size = st.Size()
	if err := db.readMeta(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// Close releases the file.
func (db *DB) Close() error {
	db.unlock()
	return db.f.Close()
}

func (db *DB) fail(err error) error {
	return fmt.Errorf("database %s: %w: %w", db.path, ErrDamaged, err)
}

type meta struct {
	pageSize uint32
	root     uint64
	pages    uint64
	txid     uint64
}

// readMeta picks the newer of the two meta pages whose checksum holds, as
// bbolt does. The second one's offset is the page size the first one
// gives, or, when the first is damaged, the page sizes bbolt writes with.
func (db *DB) readMeta() error {
	m0, err0 := db.metaAt(0)
	var sizes []int64
	if err0 == nil {
		sizes = []int64{int64(m0.pageSize)}
	} else {
		sizes = []int64{4096, 8192, 16384, 32768, 65536}
	}
	var m1 meta
	err1 := err0
	for _, s := range sizes {
		if m1, err1 = db.metaAt(s); err1 == nil && int64(m1.pageSize) == s {
			break
		}
		if err1 == nil {
			err1 = fmt.Errorf("meta page 1 at offset %d gives page size %d", s, m1.pageSize)
		}
	}
	var m meta
	switch {
	case err0 == nil && (err1 != nil || m0.txid >= m1.txid):
		m = m0
	case err1 == nil:
		m = m1
	default:
		if db.size == 0 {
			return db.fail(errors.New("the file is empty"))
		}
		return db.fail(fmt.Errorf("neither meta page holds: %w; %w", err0, err1))
	}
	db.pageSize, db.pages = int(m.pageSize), m.pages
	if db.pages <= m.root || m.root < 2 {
		return db.fail(fmt.Errorf("the root bucket's page %d is outside the database's %d pages", m.root, db.pages))
	}
	db.root = Bucket{db: db, root: m.root}
	return nil
}

func (db *DB) metaAt(off int64) (meta, error) {
	b := make([]byte, headerSize+metaSize)
	if _, err := db.f.ReadAt(b, off); err != nil {
		if errors.Is(err, io.EOF) {
			return meta{}, fmt.Errorf("the file ends at %d, before the meta page at %d", db.size, off)
		}
		return meta{}, err
	}
	if binary.LittleEndian.Uint16(b[8:])&metaPage == 0 {
		return meta{}, fmt.Errorf("the page at offset %d is no meta page", off)
	}
	b = b[headerSize:]
	if binary.LittleEndian.Uint32(b) != magic {
		return meta{}, fmt.Errorf("the page at offset %d is not bbolt's: not an etcd database", off)
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != version {
		return meta{}, fmt.Errorf("the meta page at offset %d has version %d, not %d", off, v, version)
	}
	h := fnv.New64a()
	_, _ = h.Write(b[:56])
	if h.Sum64() != binary.LittleEndian.Uint64(b[56:]) {
		return meta{}, fmt.Errorf("the meta page at offset %d fails its checksum", off)
	}
	m := meta{
		pageSize: binary.LittleEndian.Uint32(b[8:]),
		root:     binary.LittleEndian.Uint64(b[16:]),
		pages:    binary.LittleEndian.Uint64(b[40:]),
		txid:     binary.LittleEndian.Uint64(b[48:]),
	}
	if m.pageSize < 512 || m.pageSize > 1<<20 || m.pageSize&(m.pageSize-1) != 0 {
		return meta{}, fmt.Errorf("the meta page at offset %d gives page size %d", off, m.pageSize)
	}
	return m, nil
}

// page reads page id with its overflow pages.
func (db *DB) page(id uint64) ([]byte, error) {
	if p, ok := db.cache[id]; ok {
		return p, nil
	}
	if id < 2 || id >= db.pages {
		return nil, db.fail(fmt.Errorf("page %d is outside the database's %d pages", id, db.pages))
	}
	off := int64(id) * int64(db.pageSize)
	head := make([]byte, headerSize)
	if _, err := db.f.ReadAt(head, off); err != nil {
		return nil, db.fail(fmt.Errorf("page %d: %w", id, err))
	}
	overflow := uint64(binary.LittleEndian.Uint32(head[12:]))
	if got := binary.LittleEndian.Uint64(head); got != id {
		return nil, db.fail(fmt.Errorf("page %d holds page %d's header", id, got))
	}
	if id+overflow >= db.pages {
		return nil, db.fail(fmt.Errorf("page %d runs %d pages past the database's %d", id, overflow, db.pages))
	}
	n := int64(1+overflow) * int64(db.pageSize)
	if off+n > db.size {
		return nil, db.fail(fmt.Errorf("page %d ends past the file's %d bytes", id, db.size))
	}
	p := make([]byte, n)
	if _, err := db.f.ReadAt(p, off); err != nil {
		return nil, db.fail(fmt.Errorf("page %d: %w", id, err))
	}
	if len(db.cache) >= 256 {
		clear(db.cache)
	}
	db.cache[id] = p
	return p, nil
}

// node is a page's elements, as a cursor walks them.
type node struct {
	p     []byte
	leaf  bool
	count int
}

func (db *DB) node(p []byte, where string) (node, error) {
	if len(p) < headerSize {
		return node{}, db.fail(fmt.Errorf("%s: a page of %d bytes", where, len(p)))
	}
	flags, count := binary.LittleEndian.Uint16(p[8:]), int(binary.LittleEndian.Uint16(p[10:]))
	if flags&(branchPage|leafPage) == 0 {
		return node{}, db.fail(fmt.Errorf("%s: page flags %#x are neither branch nor leaf", where, flags))
	}
	if headerSize+count*elementSize > len(p) {
		return node{}, db.fail(fmt.Errorf("%s: %d elements do not fit in its %d bytes", where, count, len(p)))
	}
	return node{p: p, leaf: flags&leafPage != 0, count: count}, nil
}

// element returns element i: its key, and the leaf's flags and value or
// the branch's child page.
func (n node) element(db *DB, i int) (key, value []byte, flags uint32, child uint64, err error) {
	e := headerSize + i*elementSize
	field := func(at int) int { return int(binary.LittleEndian.Uint32(n.p[e+at:])) }
	var pos, ksize, vsize int
	if n.leaf {
		flags, pos, ksize, vsize = uint32(field(0)), field(4), field(8), field(12)
	} else {
		pos, ksize, child = field(0), field(4), binary.LittleEndian.Uint64(n.p[e+8:])
	}
	start := e + pos
	if pos < 0 || ksize < 0 || vsize < 0 || start+ksize+vsize > len(n.p) || start+ksize+vsize < start {
		return nil, nil, 0, 0, db.fail(fmt.Errorf("element %d of page %d points past the page", i, binary.LittleEndian.Uint64(n.p)))
	}
	key = n.p[start : start+ksize : start+ksize]
	if n.leaf {
		value = n.p[start+ksize : start+ksize+vsize : start+ksize+vsize]
	}
	return key, value, flags, child, nil
}

// Bucket is a bucket of the database: a page tree of its own, or a page
// held inline in its parent's value.
type Bucket struct {
	db     *DB
	root   uint64
	inline []byte
}

// Bucket returns the top-level bucket called name, or nil when there is
// none.
func (db *DB) Bucket(name []byte) (*Bucket, error) {
	v, flags, err := db.root.get(name)
	if err != nil || v == nil {
		return nil, err
	}
	if flags&bucketLeaf == 0 {
		return nil, db.fail(fmt.Errorf("%s is a key, not a bucket", name))
	}
	if len(v) < 16 {
		return nil, db.fail(fmt.Errorf("bucket %s: a header of %d bytes", name, len(v)))
	}
	b := &Bucket{db: db, root: binary.LittleEndian.Uint64(v)}
	if b.root == 0 {
		b.inline = v[16:]
	}
	return b, nil
}

// Get returns the value of key, or nil when the bucket has none.
func (b *Bucket) Get(key []byte) ([]byte, error) {
	v, flags, err := b.get(key)
	if err != nil || v == nil || flags&bucketLeaf != 0 {
		return nil, err
	}
	return v, nil
}

func (b *Bucket) get(key []byte) ([]byte, uint32, error) {
	n, err := b.rootNode()
	if err != nil {
		return nil, 0, err
	}
	for depth := 0; ; depth++ {
		if depth == maxDepth {
			return nil, 0, b.db.fail(errors.New("the page tree is deeper than any bbolt writes"))
		}
		var failed error
		// The first element whose key is not below key, as bbolt
		// searches.
		i := sort.Search(n.count, func(i int) bool {
			k, _, _, _, err := n.element(b.db, i)
			if err != nil {
				failed = err
				return true
			}
			return bytes.Compare(k, key) >= 0
		})
		if failed != nil {
			return nil, 0, failed
		}
		if n.leaf {
			if i == n.count {
				return nil, 0, nil
			}
			k, v, flags, _, err := n.element(b.db, i)
			if err != nil || !bytes.Equal(k, key) {
				return nil, 0, err
			}
			return v, flags, nil
		}
		// A branch's element covers the keys from its own to the next
		// one's.
		if i == n.count {
			i--
		} else if k, _, _, _, _ := n.element(b.db, i); !bytes.Equal(k, key) && i > 0 {
			i--
		}
		if n, err = b.child(n, i); err != nil {
			return nil, 0, err
		}
	}
}

func (b *Bucket) rootNode() (node, error) {
	if b.root == 0 {
		return b.db.node(b.inline, "an inline bucket")
	}
	p, err := b.db.page(b.root)
	if err != nil {
		return node{}, err
	}
	return b.db.node(p, fmt.Sprintf("page %d", b.root))
}

func (b *Bucket) child(n node, i int) (node, error) {
	if n.count == 0 {
		return node{}, b.db.fail(errors.New("an empty branch page"))
	}
	_, _, _, id, err := n.element(b.db, i)
	if err != nil {
		return node{}, err
	}
	if b.root == 0 {
		return node{}, b.db.fail(errors.New("an inline bucket with a branch page"))
	}
	p, err := b.db.page(id)
	if err != nil {
		return node{}, err
	}
	return b.db.node(p, fmt.Sprintf("page %d", id))
}

// Cursor walks a bucket's keys in order, from either end.
func (b *Bucket) Cursor() *Cursor { return &Cursor{b: b} }

// Cursor is a position in a bucket. Nested buckets are skipped: the keys it
// returns have values.
type Cursor struct {
	b     *Bucket
	stack []frame
}

type frame struct {
	n node
	i int
}

// First moves to the bucket's first key. A nil key means it has none.
func (c *Cursor) First() (key, value []byte, err error) { return c.start(false) }

// Last moves to the bucket's last key.
func (c *Cursor) Last() (key, value []byte, err error) { return c.start(true) }

// Next moves to the next key; a nil key means the end.
func (c *Cursor) Next() (key, value []byte, err error) { return c.step(false) }

// Prev moves to the key before.
func (c *Cursor) Prev() (key, value []byte, err error) { return c.step(true) }

func (c *Cursor) start(back bool) ([]byte, []byte, error) {
	n, err := c.b.rootNode()
	if err != nil {
		return nil, nil, err
	}
	c.stack = c.stack[:0]
	if err := c.descend(n, back); err != nil {
		return nil, nil, err
	}
	return c.current(back)
}

// descend pushes n and the pages under its first (or last) elements down
// to a leaf.
func (c *Cursor) descend(n node, back bool) error {
	for {
		if len(c.stack) == maxDepth {
			return c.b.db.fail(errors.New("the page tree is deeper than any bbolt writes"))
		}
		i := 0
		if back {
			i = n.count - 1
		}
		c.stack = append(c.stack, frame{n: n, i: i})
		if n.leaf {
			return nil
		}
		var err error
		if n, err = c.b.child(n, i); err != nil {
			return err
		}
	}
}

// current returns the leaf element the cursor is on, moving on past empty
// leaves and nested buckets.
func (c *Cursor) current(back bool) ([]byte, []byte, error) {
	for {
		if len(c.stack) == 0 {
			return nil, nil, nil
		}
		top := c.stack[len(c.stack)-1]
		if top.i >= 0 && top.i < top.n.count {
			k, v, flags, _, err := top.n.element(c.b.db, top.i)
			if err != nil {
				return nil, nil, err
			}
			if flags&bucketLeaf == 0 {
				return k, v, nil
			}
		}
		if err := c.move(back); err != nil {
			return nil, nil, err
		}
	}
}

func (c *Cursor) step(back bool) ([]byte, []byte, error) {
	if len(c.stack) == 0 {
		return nil, nil, nil
	}
	if err := c.move(back); err != nil {
		return nil, nil, err
	}
	return c.current(back)
}

// move goes one element on: up the stack while a page is exhausted, then
// down the next subtree to its nearest leaf.
func (c *Cursor) move(back bool) error {
	for len(c.stack) > 0 {
		top := &c.stack[len(c.stack)-1]
		if back {
			top.i--
		} else {
			top.i++
		}
		if top.i >= 0 && top.i < top.n.count {
			if top.n.leaf {
				return nil
			}
			n, err := c.b.child(top.n, top.i)
			if err != nil {
				return err
			}
			return c.descend(n, back)
		}
		c.stack = c.stack[:len(c.stack)-1]
	}
	return nil
}
