package soak

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"
)

// dirState is what a data dir holds, read straight from its bbolt file
// with etcd's own protobufs: the harness checks restores without etcdkit's
// code.
type dirState struct {
	keys   map[string]keyState
	leases map[int64]int64 // lease ID → TTL in seconds
	users  []string
	authOn bool
	// rev is the data dir's revision: the newest in its key bucket,
	// tombstones included.
	rev int64
}

// keyState is one live key: what the checks compare.
type keyState struct {
	value                    uint64 // hash of the value
	create, mod, version, ls int64
}

func (k keyState) String() string {
	return fmt.Sprintf("{value %016x create %d mod %d version %d lease %x}", k.value, k.create, k.mod, k.version, k.ls)
}

// readDataDir reads the live keys, leases and users of the member data dir
// dir (its member/snap/db).
func readDataDir(dir string) (dirState, error) {
	path := filepath.Join(dir, "member", "snap", "db")
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return dirState{}, fmt.Errorf("data dir %s: %w", dir, err)
	}
	defer func() { _ = db.Close() }()
	s := dirState{keys: map[string]keyState{}, leases: map[int64]int64{}}
	err = db.View(func(tx *bolt.Tx) error {
		kb := tx.Bucket([]byte("key"))
		if kb == nil {
			return fmt.Errorf("no key bucket")
		}
		// Revisions sort as bytes; the last entry of a key wins, and a
		// tombstone (a revision key ending in 't') removes it.
		if err := kb.ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(v, &kv); err != nil {
				return fmt.Errorf("key bucket entry %x: %w", k, err)
			}
			if len(k) >= 8 {
				s.rev = max(s.rev, int64(binary.BigEndian.Uint64(k[:8])))
			}
			if len(k) == 18 && k[17] == 't' {
				delete(s.keys, string(kv.Key))
				return nil
			}
			s.keys[string(kv.Key)] = keyState{value: hashValue(kv.Value), create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version, ls: kv.Lease}
			return nil
		}); err != nil {
			return err
		}
		if lb := tx.Bucket([]byte("lease")); lb != nil {
			if err := lb.ForEach(func(k, v []byte) error {
				var l leasepb.Lease
				if err := proto.Unmarshal(v, &l); err != nil {
					return fmt.Errorf("lease %x: %w", k, err)
				}
				s.leases[int64(binary.BigEndian.Uint64(k))] = l.TTL
				return nil
			}); err != nil {
				return err
			}
		}
		if ub := tx.Bucket([]byte("authUsers")); ub != nil {
			if err := ub.ForEach(func(k, v []byte) error {
				var u authpb.User
				if err := proto.Unmarshal(v, &u); err != nil {
					return fmt.Errorf("user %q: %w", k, err)
				}
				s.users = append(s.users, string(u.Name))
				return nil
			}); err != nil {
				return err
			}
		}
		if ab := tx.Bucket([]byte("auth")); ab != nil {
			s.authOn = bytes.Equal(ab.Get([]byte("authEnabled")), []byte{1})
		}
		return nil
	})
	sort.Strings(s.users)
	return s, err
}
