package restore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdkit/etcdkit/internal/database"
	"github.com/etcdkit/etcdkit/internal/etcdstorage"
	"github.com/etcdkit/etcdkit/snapshot"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/authpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/etcdkit/etcdkit/internal/datadir"
)

// defragBatch is what one transaction of compactCopy copies: its pages are
// Go memory until the commit writes them.
const defragBatch = 16 << 20

// compactCopy writes the database at src into a new file at dst as etcd
// leaves it after a compaction at revision at and a defragmentation: of
// each key only its last revision, none of a key whose last revision
// deleted it, the compaction's revision in the meta bucket, every other
// bucket as it is, the pages filled as etcd's defragmentation fills them
// (90 %).
//
// It does both in one copy, and without etcd's mvcc store: that store
// builds an index of every key (some 200 bytes each, the Go heap of an
// 8 GiB database) and decodes every value, and etcd's Defrag maps its new
// file with MAP_POPULATE and grows the map by doubling, each growth
// copying every page the open transaction holds. Here a first pass reads
// the key bucket from its newest revision back and keeps, per key, the
// 128-bit hash of its name and its last revision (40 bytes a key, nothing
// per revision); the second copies, in revision order, the revisions that
// are a key's last, into a file mapped once as large as the old one and
// never synced (a scratch file, uploaded and removed).
//
// With keep, only the keys keep picks are copied, under the name it gives
// (a tenant's keys, renamed or not), and only the leases they are attached
// to (the key bucket is copied before the lease bucket: buckets are in
// name order).
func compactCopy(ctx context.Context, src, dst string, at int64, keep *keyPick) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	in, err := bolt.Open(src, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	out, err := bolt.Open(dst, 0o600, &bolt.Options{NoSync: true, NoGrowSync: true, NoFreelistSync: true,
		FreelistType: bolt.FreelistMapType, InitialMmapSize: int(info.Size()) + 64<<20, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	defer func() { _ = out.Close() }()
	dir := filepath.Dir(dst)
	return in.View(func(tx *bolt.Tx) error {
		last, err := lastRevisions(ctx, tx.Bucket(etcdstorage.KeyBucket))
		if err != nil {
			return err
		}
		c := &copier{out: out, dir: dir}
		if err := c.begin(); err != nil {
			return err
		}
		defer func() { _ = c.w.Rollback() }()
		err = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if err := c.bucket(name); err != nil {
				return err
			}
			pick := entries(name, last, keep)
			return b.ForEach(func(k, v []byte) error {
				v, ok, err := pick(k, v)
				if err != nil || !ok {
					return err
				}
				return c.put(ctx, k, v)
			})
		})
		if err != nil {
			return err
		}
		rev := etcdstorage.RevisionKey(at)
		if err := c.bucket(etcdstorage.MetaBucket); err != nil {
			return err
		}
		for _, k := range etcdstorage.CompactKeys {
			if err := c.put(ctx, k, rev); err != nil {
				return err
			}
		}
		return c.w.Commit()
	})
}

// entries returns what the copy of bucket name keeps of each entry, and
// as what: of the keys, each one's last revision, no tombstone (as
// picked by keep, when set); of the leases, users and roles, those keep
// picks.
func entries(name []byte, last map[[16]byte][2]int64, keep *keyPick) func(k, v []byte) ([]byte, bool, error) {
	all := func(_, v []byte) ([]byte, bool, error) { return v, true, nil }
	switch {
	case bytes.Equal(name, etcdstorage.KeyBucket):
		return func(k, v []byte) ([]byte, bool, error) {
			if len(k) < revBytesLen || database.Tombstone(k) {
				return nil, false, nil
			}
			key, err := kvKey(v)
			if err != nil {
				return nil, false, fmt.Errorf("revision %x: %w", k, err)
			}
			if last[keyHash(key)] != revOf(k) {
				return nil, false, nil
			}
			if keep != nil {
				return keep.kv(v)
			}
			return v, true, nil
		}
	case keep == nil:
		return all
	case bytes.Equal(name, etcdstorage.LeaseBucket):
		return func(k, v []byte) ([]byte, bool, error) {
			return v, len(k) != 8 || keep.leases[int64(binary.BigEndian.Uint64(k))], nil
		}
	// Roles before users: buckets are in name order.
	case bytes.Equal(name, etcdstorage.RoleBucket):
		return func(_, v []byte) ([]byte, bool, error) { return keep.role(v) }
	case bytes.Equal(name, etcdstorage.UserBucket):
		return func(_, v []byte) ([]byte, bool, error) { return keep.user(v) }
	}
	return all
}

// keyPick picks the keys under a prefix for compactCopy, renames them,
// and gathers the leases they are attached to. Of the users and roles it
// keeps root and those whose every permission lies under the prefix
// (renamed with it): another tenant's users must not reach the new
// cluster.
type keyPick struct {
	prefix []byte
	rename Rename
	leases map[int64]bool
	// roles kept; the users and roles left out.
	roles                      map[string]bool
	usersLeftOut, rolesLeftOut []string
}

func newKeyPick(prefix string, rename Rename) *keyPick {
	return &keyPick{prefix: []byte(prefix), rename: rename, leases: map[int64]bool{}, roles: map[string]bool{}}
}

// role is the encoded role v as copied, if all it grants lies under the
// prefix.
func (p *keyPick) role(v []byte) ([]byte, bool, error) {
	var r authpb.Role
	if err := proto.Unmarshal(v, &r); err != nil {
		return nil, false, fmt.Errorf("a role: %w", err)
	}
	name := string(r.Name)
	if name != "root" {
		end := []byte(clientv3.GetPrefixRangeEnd(string(p.prefix)))
		for _, perm := range r.KeyPermission {
			within := bytes.HasPrefix(perm.Key, p.prefix) &&
				(len(perm.RangeEnd) == 0 || bytes.Compare(perm.RangeEnd, perm.Key) > 0 && bytes.Compare(perm.RangeEnd, end) <= 0)
			if !within {
				p.rolesLeftOut = append(p.rolesLeftOut, name)
				return nil, false, nil
			}
			perm.Key, perm.RangeEnd = p.rename.key(perm.Key), p.rename.rangeEnd(perm.RangeEnd)
		}
	}
	p.roles[name] = true
	out, err := proto.Marshal(&r)
	return out, err == nil, err
}

// user is the encoded user v, if each of its roles was kept.
func (p *keyPick) user(v []byte) ([]byte, bool, error) {
	var u authpb.User
	if err := proto.Unmarshal(v, &u); err != nil {
		return nil, false, fmt.Errorf("a user: %w", err)
	}
	for _, r := range u.Roles {
		// etcd keeps no record of the root role: it is built in.
		if string(u.Name) != "root" && r != "root" && !p.roles[r] {
			p.usersLeftOut = append(p.usersLeftOut, string(u.Name))
			return nil, false, nil
		}
	}
	return v, true, nil
}

// kv is the encoded KeyValue v as copied, if its key is picked.
func (p *keyPick) kv(v []byte) ([]byte, bool, error) {
	key, id := keyAndLease(v)
	if !bytes.HasPrefix(key, p.prefix) {
		return nil, false, nil
	}
	if id != 0 {
		p.leases[id] = true
	}
	if p.rename == (Rename{}) {
		return v, true, nil
	}
	kv, err := database.DecodeKeyValue(v)
	if err != nil {
		return nil, false, fmt.Errorf("key %q: %w", key, err)
	}
	kv.Key = p.rename.key(kv.Key)
	return appendKeyValue(nil, (*snapshot.KeyValue)(&kv)), true, nil
}

// revOf is the revision a key of the key bucket names (a tombstone's
// has a mark after it).
func revOf(k []byte) [2]int64 {
	main, sub := etcdstorage.RevisionOf(k[:revBytesLen])
	return [2]int64{main, sub}
}

// kvKey is the key of an encoded KeyValue.
func kvKey(v []byte) ([]byte, error) {
	if key, _ := keyAndLease(v); len(key) > 0 {
		return key, nil
	}
	return nil, errors.New("a KeyValue without a key")
}

// lastRevisions reads the key bucket from its newest revision back and
// returns each key's last revision (a deletion's too), by the hash of its
// name.
func lastRevisions(ctx context.Context, b *bolt.Bucket) (map[[16]byte][2]int64, error) {
	last := map[[16]byte][2]int64{}
	if b == nil {
		return last, nil
	}
	c := b.Cursor()
	n := 0
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		if len(k) < revBytesLen {
			continue
		}
		if n++; n%65536 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		key, err := kvKey(v)
		if err != nil {
			return nil, fmt.Errorf("revision %x: %w", k, err)
		}
		h := keyHash(key)
		if _, ok := last[h]; !ok {
			last[h] = revOf(k)
		}
	}
	return last, nil
}

// keyHash names a key in 128 bits: two keys of one database share a hash
// with a chance far below that of the disk corrupting it.
func keyHash(key []byte) [16]byte {
	sum := sha256.Sum256(key)
	return [16]byte(sum[:16])
}

// copier writes into a new database in transactions of defragBatch.
type copier struct {
	out   *bolt.DB
	dir   string
	w     *bolt.Tx
	b     *bolt.Bucket
	name  []byte
	batch int
}

func (c *copier) begin() (err error) {
	c.w, err = c.out.Begin(true)
	return err
}

func (c *copier) bucket(name []byte) error {
	b, err := c.w.CreateBucketIfNotExists(name)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", name, err)
	}
	c.b, c.name = b, name
	c.b.FillPercent = 0.9
	return nil
}

func (c *copier) put(ctx context.Context, k, v []byte) error {
	if c.batch += len(k) + len(v); c.batch > defragBatch {
		if err := c.w.Commit(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Between transactions nothing remaps either file: the pages
		// both maps read stay in the page cache, not in this process.
		_ = datadir.ReleaseMapped(c.dir)
		if err := c.begin(); err != nil {
			return err
		}
		if err := c.bucket(c.name); err != nil {
			return err
		}
		c.batch = len(k) + len(v)
	}
	return c.b.Put(k, v)
}
