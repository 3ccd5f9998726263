package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/etcdkit/etcdkit/internal/database"
	"github.com/etcdkit/etcdkit/internal/scratch"
	"github.com/etcdkit/etcdkit/store"
)

// KeyVersion is one key as a revision left it. A chain's last ones are
// what a cluster that continues it holds at the chain's last revision.
type KeyVersion struct {
	Key     []byte `json:"key"`
	Create  int64  `json:"create_revision,omitempty"`
	Mod     int64  `json:"mod_revision"`
	Version int64  `json:"version,omitempty"`
	// Value is the CRC-32C of the value.
	Value   uint32 `json:"value_crc32c,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// tailKeys is how many keys a full's tail holds: enough that two
// histories that differ show it, few enough to ask the cluster in a moment
// and to keep in an identity record.
const tailKeys = 32

// deltaTailKeys is how many keys a delta's tail holds. The newest of them
// tell at the chain's revision; once the cluster compacted it, keys are
// compared as they are now, and the newest keys of a busy cluster are the
// likeliest to be written again since: the older ones tell instead.
const deltaTailKeys = 256

// tailer keeps the newest version of each key it is given, in revision
// order.
type tailer struct {
	byKey map[string]KeyVersion
}

func (t *tailer) add(kv KeyValue, rev int64, deleted bool) {
	if t.byKey == nil {
		t.byKey = map[string]KeyVersion{}
	}
	v := KeyVersion{Key: bytes.Clone(kv.Key), Mod: rev, Deleted: deleted}
	if !deleted {
		v.Create, v.Version, v.Value = kv.CreateRevision, kv.Version, crc32.Checksum(kv.Value, castagnoli)
	}
	if old, ok := t.byKey[string(kv.Key)]; !ok || old.Mod <= rev {
		t.byKey[string(kv.Key)] = v
	}
}

// tail is the newest n keys, newest first.
func (t *tailer) tail(n int) []KeyVersion {
	out := make([]KeyVersion, 0, len(t.byKey))
	for _, v := range t.byKey {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b KeyVersion) int {
		if a.Mod != b.Mod {
			return int(b.Mod - a.Mod)
		}
		return bytes.Compare(a.Key, b.Key)
	})
	return out[:min(len(out), n)]
}

// dbTail reads an etcd database's tail (its newest revisions' keys) and
// its members' IDs.
func dbTail(path string) ([]KeyVersion, []string, error) {
	db, err := database.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = db.Close() }()
	var t tailer
	keys, err := db.Bucket([]byte("key"))
	if err != nil {
		return nil, nil, err
	}
	if keys != nil {
		c := keys.Cursor()
		// Revisions, newest first, until enough keys were seen.
		k, v, err := c.Last()
		for ; k != nil && err == nil && len(t.byKey) < tailKeys; k, v, err = c.Prev() {
			if len(k) < 17 {
				continue
			}
			kv, err := database.DecodeKeyValue(v)
			if err != nil {
				return nil, nil, fmt.Errorf("database %s: key bucket: %w", path, err)
			}
			t.add(KeyValue(kv), int64(binary.BigEndian.Uint64(k[:8])), database.Tombstone(k))
		}
		if err != nil {
			return nil, nil, err
		}
	}
	var members []string
	if b, err := db.Bucket([]byte("members")); err != nil {
		return nil, nil, err
	} else if b != nil {
		c := b.Cursor()
		k, _, err := c.First()
		for ; k != nil && err == nil; k, _, err = c.Next() {
			members = append(members, string(k))
		}
		if err != nil {
			return nil, nil, err
		}
	}
	slices.Sort(members)
	return t.tail(tailKeys), members, nil
}

// DeltaTail is what delta left of its keys by revision upTo (its newest
// 256 keys, newest first), and its events of the revisions after
// upTo-within: what a cluster that continues the chain to upTo holds, and
// what it must have seen last.
func DeltaTail(ctx context.Context, st store.Store, delta Snapshot, c Codec, upTo, within int64) ([]KeyVersion, []*WatchEvent, error) {
	dr, err := OpenDelta(ctx, st, delta, c)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = dr.Close() }()
	var (
		t      tailer
		window []*WatchEvent
	)
	for {
		ev, err := dr.Next()
		if errors.Is(err, io.EOF) {
			return t.tail(deltaTailKeys), window, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if e := ev.EtcdEvent; e != nil && e.Kv != nil && e.Kv.ModRevision <= upTo {
			t.add(*e.Kv, e.Kv.ModRevision, e.Type == Delete)
			if e.Kv.ModRevision > upTo-within {
				window = append(window, e)
			}
		}
	}
}

// FullTail downloads a full snapshot into a scratch file in spoolDir
// (default os.TempDir()), checks that it holds the revision its name says,
// and reads its tail and its members' IDs.
func FullTail(ctx context.Context, st store.Store, full Snapshot, c Codec, spoolDir string) ([]KeyVersion, []string, error) {
	path, done, err := spoolFull(ctx, st, full, c, spoolDir)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	if err := holdsItsName(full, path); err != nil {
		return nil, nil, err
	}
	return dbTail(path)
}

// CheckFull reads full through its checksum into a scratch file in
// spoolDir (default os.TempDir()) and checks that its database holds the
// revision its name says, as a restore checks it before use: a full that
// holds less, or no etcd database at all, fails with ErrNotABackup.
func CheckFull(ctx context.Context, st store.Store, full Snapshot, c Codec, spoolDir string) error {
	path, done, err := spoolFull(ctx, st, full, c, spoolDir)
	if err != nil {
		return err
	}
	defer done()
	return holdsItsName(full, path)
}

// spoolFull downloads a full snapshot's database into a scratch file in
// dir (default os.TempDir()); done removes it.
func spoolFull(ctx context.Context, st store.Store, full Snapshot, c Codec, dir string) (path string, done func(), err error) {
	rc, err := Open(ctx, st, full, c)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = rc.Close() }()
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := scratch.File(dir, "etcdkit-compare-*.db")
	if err != nil {
		return "", nil, fmt.Errorf("spool directory %s: %w", dir, err)
	}
	done = func() { _ = f.Close(); _ = os.Remove(f.Name()) }
	if _, err := io.Copy(f, rc); err != nil {
		done()
		return "", nil, fmt.Errorf("snapshot %s: %w", full.Key, err)
	}
	if err := f.Close(); err != nil {
		done()
		return "", nil, err
	}
	return f.Name(), done, nil
}

// holdsItsName checks that the database of full, spooled at path, holds
// the revision its name says. A full that holds less (damaged, or named
// by hand) is no evidence of anything: neither of a cluster's past nor a
// reason to expire what it seems to supersede.
func holdsItsName(full Snapshot, path string) error {
	rev, err := DatabaseRevision(path)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w: its database cannot be read: %w", full.Key, ErrNotABackup, err)
	}
	if rev < full.LastRevision {
		return fmt.Errorf("snapshot %s: %w: it holds revision %d, its name says %d: delete it, or where a lock keeps it take it out of the backups with %s",
			full.Key, ErrNotABackup, rev, full.LastRevision, ExcludeMark)
	}
	return nil
}
