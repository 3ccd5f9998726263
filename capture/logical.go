package capture

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/etcdkit/etcdkit/internal/scratch"
)

// maxLeaseTTL is etcd's longest lease (lease.MaxLeaseTTL).
const maxLeaseTTL = 9_000_000_000

type apiDatastore struct {
	cli *clientv3.Client
	o   DatastoreOptions
	// noTTL: the datastore answered that it keeps no lease TTLs.
	noTTL atomic.Bool
}

func (*apiDatastore) Kind() snapshot.SourceKind { return snapshot.SourceEtcdAPI }

// snapshot.Identity of a datastore behind etcd's API: its header's cluster ID
// (kine answers 0, the same for every kine: its chain is told from another
// datastore's by its keys alone), its one member list and the version it
// emulates.
func (s *apiDatastore) Identity(ctx context.Context) (snapshot.Identity, error) {
	id, err := IdentityOf(ctx, s.cli)
	if err != nil {
		return snapshot.Identity{}, err
	}
	id.Source = snapshot.SourceEtcdAPI
	return id, nil
}

func (s *apiDatastore) Revision(ctx context.Context) (int64, error) {
	return currentRevision(ctx, s.cli)
}

// Watch asks for the whole keyspace as a range ("\x00" to the end): the
// form kine serves too. No leader is required: such a datastore has none.
func (s *apiDatastore) Watch(ctx context.Context, from int64) clientv3.WatchChan {
	return s.cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
}

// LeaseTTL asks LeaseTimeToLive; a datastore that does not serve it (kine,
// whose lease IDs are their TTLs: LeaseGrant answers ID = TTL) gets the
// ID as the TTL when it is one etcd can grant, none otherwise.
func (s *apiDatastore) LeaseTTL(ctx context.Context, id int64) (int64, error) {
	if !s.noTTL.Load() {
		ttl, err := etcdDatastore{cli: s.cli}.LeaseTTL(ctx, id)
		if !unsupported(err) {
			return ttl, err
		}
		s.noTTL.Store(true)
	}
	if id > 0 && id <= maxLeaseTTL {
		return id, nil
	}
	return 0, nil
}

// unsupported: the datastore does not serve the call (kine answers
// Unimplemented for services it lacks, Unknown "… is not supported" for
// calls of those it has).
func unsupported(err error) bool {
	if err == nil {
		return false
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	return st.Code() == codes.Unimplemented || st.Code() == codes.Unknown && strings.Contains(st.Message(), "not supported")
}

// Full builds the logical full in the spool directory and streams it.
func (s *apiDatastore) Full(ctx context.Context) (io.ReadCloser, error) {
	f, err := scratch.File(s.o.SpoolDir, "etcdkit-logical-*.db")
	if err != nil {
		return nil, fmt.Errorf("spool directory %s (it must exist, with room for the keyspace): %w", s.o.SpoolDir, err)
	}
	path := f.Name()
	_ = f.Close()
	start := time.Now()
	info, rev, err := s.build(ctx, path)
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	logger(s.o.Logger).Info("logical full built", "revision", rev, "keys", info.Keys, "leases", info.Leases, "took", time.Since(start).Round(time.Millisecond))
	db, err := os.Open(path)
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	h := sha256.New()
	return &logicalStream{Reader: io.MultiReader(io.TeeReader(db, h), &sumReader{h: h}), db: db, info: info}, nil
}

// logicalStream is a logical full's database followed by its SHA-256;
// closing it removes the database.
type logicalStream struct {
	io.Reader
	db   *os.File
	info snapshot.Logical
}

func (l *logicalStream) Close() error {
	err := l.db.Close()
	return errors.Join(err, os.Remove(l.db.Name()))
}

// sumReader reads the hash of what went before it, once that is read.
type sumReader struct {
	h   hash.Hash
	sum []byte
}

func (r *sumReader) Read(p []byte) (int, error) {
	if r.sum == nil {
		r.sum = r.h.Sum(nil)
	}
	if len(r.sum) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.sum)
	r.sum = r.sum[n:]
	return n, nil
}

// build writes the keyspace at the datastore's current revision into a
// database of etcd's layout at path: each key at its mod revision in the
// key bucket (the keys of one revision numbered in key order, as a
// transaction's), its leases in the lease bucket, compacted at the
// revision (no history before it), and the marker of a logical full.
// The keyspace is read as of one moment however long the reading takes:
// one RangeStream, or pages at the revision of the first. The keys arrive
// in key order and the key bucket is in revision order: they are spooled
// beside the database as they come and written in revision order once all
// are read, so bbolt fills its pages whole and in sequence instead of
// splitting them at random (a database of 147 MiB instead of 208 for
// 100,000 keys of 1 KiB).
func (s *apiDatastore) build(ctx context.Context, path string) (snapshot.Logical, int64, error) {
	spool, err := os.Create(path + ".keys")
	if err != nil {
		return snapshot.Logical{}, 0, fmt.Errorf("logical full: %w", err)
	}
	defer func() {
		_ = spool.Close()
		_ = os.Remove(spool.Name())
	}()
	b := logicalBuilder{spool: spool, w: bufio.NewWriterSize(spool, 1<<20), leases: map[int64]bool{}}
	// kine answers nothing for a range "to the end" at a past revision, and
	// PostgreSQL refuses a bound that is not UTF-8 text: the keyspace is
	// read up to the last code point, which every text key is below. etcd
	// (its members have IDs; kine answers 0) also holds binary keys above
	// it, read as a second range.
	err = b.read(ctx, s.cli, "\x00", textEnd, s.o.PageSize)
	if err == nil && b.member != 0 {
		err = b.read(ctx, s.cli, textEnd, "\x00", s.o.PageSize)
	}
	if err == nil {
		err = b.complete(ctx, s)
	}
	if err == nil {
		err = b.w.Flush()
	}
	if err != nil {
		return snapshot.Logical{}, 0, fmt.Errorf("logical full: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoFreelistSync: true, Timeout: time.Second})
	if err != nil {
		return snapshot.Logical{}, 0, fmt.Errorf("database %s: %w", path, err)
	}
	b.db = db
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"key", "meta", "lease", "alarm", "cluster", "members", "members_removed", "auth", "authUsers", "authRoles"} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = b.keys()
	}
	if err == nil {
		err = b.finish(ctx, s)
	}
	err = errors.Join(err, db.Sync(), db.Close())
	if err != nil {
		return snapshot.Logical{}, 0, fmt.Errorf("logical full: %w", err)
	}
	return b.info, b.rev, nil
}

type logicalBuilder struct {
	// spool holds the encoded keys as read, w writes it, at is its length;
	// spooled says where each key lies, with its mod revision.
	spool   *os.File
	w       *bufio.Writer
	at      int64
	spooled []spooledKey
	db      *bolt.DB
	rev     int64
	// member is the ID of the member that answered; 0 for kine.
	member uint64
	leases map[int64]bool
	info   snapshot.Logical
}

// textEnd is U+10FFFF, the last code point: every UTF-8 key but those that
// begin with it is below it.
const textEnd = "\U0010FFFF"

type spooledKey struct {
	rev, at int64
	n       int
}

// read reads [key, end) at the builder's revision (the first read's when
// none yet) into the spool: as one stream where the datastore serves
// RangeStream (etcd 3.7, kine: one pass over kine's table, in chunks),
// else a page at a time.
func (b *logicalBuilder) read(ctx context.Context, cli *clientv3.Client, key, end string, size int64) error {
	got, err := b.stream(ctx, cli, key, end)
	if err != nil && !got && unsupported(err) {
		return b.pages(ctx, cli, key, end, size)
	}
	return err
}

// stream reads [key, end) with RangeStream; got says whether any of it
// arrived.
func (b *logicalBuilder) stream(ctx context.Context, cli *clientv3.Client, key, end string) (got bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRange(end)}
	if b.rev > 0 {
		opts = append(opts, clientv3.WithRev(b.rev))
	}
	ch, err := cli.GetStream(ctx, key, opts...)
	if err != nil {
		return false, fmt.Errorf("range stream %q: %w", key, err)
	}
	done := false
	for r := range ch {
		if err := r.Err(); err != nil {
			return got, fmt.Errorf("range stream %q at revision %d: %w", key, b.rev, err)
		}
		got = true
		if err := b.put(r.Kvs); err != nil {
			return got, err
		}
		// Only the last chunk has the header: the revision read.
		if h := r.Header; h != nil && h.Revision > 0 {
			if b.rev == 0 {
				b.rev, b.member = h.Revision, h.MemberId
			}
			done = true
		}
	}
	if !done {
		return got, fmt.Errorf("range stream %q: ended without its last chunk", key)
	}
	return got, ctx.Err()
}

func (b *logicalBuilder) pages(ctx context.Context, cli *clientv3.Client, key, end string, size int64) error {
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(size)}
		if b.rev > 0 {
			opts = append(opts, clientv3.WithRev(b.rev))
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		resp, err := cli.Get(rctx, key, opts...)
		cancel()
		if err != nil {
			return fmt.Errorf("range %q at revision %d: %w", key, b.rev, err)
		}
		if b.rev == 0 {
			b.rev, b.member = resp.Header.Revision, resp.Header.MemberId
		}
		if err := b.put(resp.Kvs); err != nil {
			return err
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		size = nextPage(size, resp.Kvs)
	}
}

// complete holds the keys read to the datastore's count of its keys at
// the revision: a key left out would be absent from every restore of the
// chain with nothing to tell. kine over SQLite holds binary keys too, which
// it serves only in a range bounded by bytes (PostgreSQL refuses such a
// bound, and such keys).
func (b *logicalBuilder) complete(ctx context.Context, s *apiDatastore) error {
	count := func() (int64, error) {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		resp, err := s.cli.Get(rctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly(), clientv3.WithRev(b.rev))
		if err != nil {
			return 0, fmt.Errorf("count the keys at revision %d: %w", b.rev, err)
		}
		return resp.Count, nil
	}
	n, err := count()
	if err != nil || n == b.info.Keys {
		return err
	}
	if n > b.info.Keys && b.member == 0 {
		if err := b.read(ctx, s.cli, textEnd, binaryEnd, s.o.PageSize); err != nil {
			return fmt.Errorf("the datastore counts %d keys at revision %d, %d of them text keys; reading the others: %w", n, b.rev, b.info.Keys, err)
		}
	}
	if n != b.info.Keys {
		return fmt.Errorf("the datastore counts %d keys at revision %d and its ranges gave %d: a full that leaves keys out is not written", n, b.rev, b.info.Keys)
	}
	return nil
}

// binaryEnd bounds the keys above every text key, for a datastore that
// serves no range to the end at a past revision.
const binaryEnd = "\xff\xff\xff\xff\xff\xff\xff\xff"

// pageBytes is what a page of a logical full aims to hold. kine answers
// each page of a range at a past revision by grouping every row from the
// page's first key to the range's end: the fewer the pages, the fewer the
// passes over its table (100,000 keys in pages of 1,000 cost a hundred).
const pageBytes = 16 << 20

// nextPage sizes the next page from the last one's keys, toward
// pageBytes, between 100 keys and a million.
func nextPage(size int64, kvs []*mvccpb.KeyValue) int64 {
	var n int64
	for _, kv := range kvs {
		n += int64(len(kv.Key) + len(kv.Value))
	}
	return min(max(size*pageBytes/max(n, 1), 100), 1_000_000)
}

// put spools a page's keys.
func (b *logicalBuilder) put(kvs []*mvccpb.KeyValue) error {
	for _, kv := range kvs {
		if kv.Version == 0 {
			// etcd reads version 0 as "no such key" (a Txn's version = 0
			// compares a create): a live key needs one.
			kv.Version, b.info.NoVersions = 1, true
		}
		if kv.CreateRevision <= 0 || kv.CreateRevision > kv.ModRevision {
			return fmt.Errorf("key %q: create revision %d, mod revision %d: not one etcd can hold", kv.Key, kv.CreateRevision, kv.ModRevision)
		}
		v, err := proto.Marshal(kv)
		if err != nil {
			return err
		}
		if _, err := b.w.Write(v); err != nil {
			return err
		}
		b.spooled = append(b.spooled, spooledKey{rev: kv.ModRevision, at: b.at, n: len(v)})
		b.at += int64(len(v))
		if kv.Lease != 0 {
			b.leases[kv.Lease] = true
		}
		b.info.Keys++
	}
	return nil
}

// keys writes the spooled keys into the key bucket in revision order, the
// keys of one revision in key order (the order they were read in), in
// transactions of about 64 MiB.
func (b *logicalBuilder) keys() error {
	slices.SortStableFunc(b.spooled, func(x, y spooledKey) int { return cmp.Compare(x.rev, y.rev) })
	var sub int64
	for i := 0; i < len(b.spooled); {
		err := b.db.Update(func(tx *bolt.Tx) error {
			bucket := tx.Bucket([]byte("key"))
			// Appended in order: full pages.
			bucket.FillPercent = 1
			var size int
			for ; i < len(b.spooled) && size < 64<<20; i++ {
				k := b.spooled[i]
				if k.rev <= 0 || k.rev > b.rev {
					return fmt.Errorf("a key at mod revision %d, outside the range's revision %d", k.rev, b.rev)
				}
				if i == 0 || b.spooled[i-1].rev != k.rev {
					sub = 0
				}
				// bbolt keeps what it is given until the commit.
				v := make([]byte, k.n)
				if _, err := b.spool.ReadAt(v, k.at); err != nil {
					return err
				}
				if err := bucket.Put(revisionKey(k.rev, sub), v); err != nil {
					return err
				}
				sub++
				size += k.n
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// finish writes the leases, the compaction at the revision and the
// marker, and says what the full cannot hold.
func (b *logicalBuilder) finish(ctx context.Context, s *apiDatastore) error {
	ttls := map[int64]int64{}
	for id := range b.leases {
		ttl, err := s.LeaseTTL(ctx, id)
		if err != nil {
			return fmt.Errorf("lease %x: %w", id, err)
		}
		if ttl > 0 {
			ttls[id] = ttl
		}
	}
	b.info.Leases = int64(len(b.leases))
	b.info.Limits = []string{fmt.Sprintf("no history: each key as it was at revision %d, compacted there", b.rev),
		"no users, roles or auth: the datastore serves no auth API"}
	if b.info.NoVersions {
		b.info.Limits = append(b.info.Limits, "no versions: the datastore keeps none; every key is at version 1")
	}
	if len(b.leases) > 0 {
		b.info.LeaseTTLs = "granted"
		if s.noTTL.Load() {
			b.info.LeaseTTLs = "lease-id"
			b.info.Limits = append(b.info.Limits, "lease TTLs: the datastore answers none; each lease's ID is taken as its TTL (kine grants ID = TTL)")
		}
		b.info.Limits = append(b.info.Limits, "lease time left: a restored lease counts its whole TTL from the restored member's start")
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		lb := tx.Bucket([]byte("lease"))
		for id, ttl := range ttls {
			var v []byte
			v = protowire.AppendTag(v, 1, protowire.VarintType)
			v = protowire.AppendVarint(v, uint64(id))
			v = protowire.AppendTag(v, 2, protowire.VarintType)
			v = protowire.AppendVarint(v, uint64(ttl))
			if err := lb.Put(binary.BigEndian.AppendUint64(nil, uint64(id)), v); err != nil {
				return err
			}
		}
		meta := tx.Bucket([]byte("meta"))
		for _, k := range []string{"scheduledCompactRev", "finishedCompactRev"} {
			if err := meta.Put([]byte(k), revisionKey(b.rev, 0)); err != nil {
				return err
			}
		}
		return meta.Put([]byte(snapshot.LogicalMarker), []byte{1})
	})
}

// revisionKey is a key bucket's key: main and sub revision, big-endian,
// joined by '_'.
func revisionKey(main, sub int64) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 17), uint64(main))
	k = append(k, '_')
	return binary.BigEndian.AppendUint64(k, uint64(sub))
}
