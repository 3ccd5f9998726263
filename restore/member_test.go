package restore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// A compressed full is decoded into the data dir and made a member where
// it lies, with etcdutl's steps run by the restore itself. The data dir
// must be the one etcdutl snapshot restore makes of the same database:
// every bucket's keys and values, the WAL's metadata, state and entries,
// and the raft snapshot, for a three-member cluster, with and without a
// revision bump.
func TestDataDirIsEtcdutls(t *testing.T) {
	ctx := context.Background()
	m := etcdtest.Start(t, etcdtest.Options{})
	cli := m.Client(t)
	if _, err := (etcdtest.Workload{Ops: 300, Seed: 7, TxnPercent: 20}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{Codec: snapshot.Codec{Compression: snapshot.Gzip}, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// etcdutl reads the object's payload with etcd's trailer, as etcdctl
	// saves it.
	raw := filepath.Join(t.TempDir(), "snapshot.db")
	rc, err := snapshot.Open(ctx, st, full, snapshot.Codec{})
	if err != nil {
		t.Fatal(err)
	}
	var payload bytes.Buffer
	if _, err := payload.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	_ = rc.Close()
	if err := os.WriteFile(raw, payload.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	const cluster = "a=http://10.0.0.1:2380,b=http://10.0.0.2:2380,c=http://10.0.0.3:2380"
	for _, bump := range []uint64{0, 1000} {
		t.Run(fmt.Sprint("bump ", bump), func(t *testing.T) {
			ours := filepath.Join(t.TempDir(), "ours")
			if _, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: ours, Name: "b", PeerURLs: []string{"http://10.0.0.2:2380"}, InitialCluster: cluster, Token: "tok"}, RevisionBump: bump}); err != nil {
				t.Fatal(err)
			}
			theirs := filepath.Join(t.TempDir(), "theirs")
			if err := etcdutl.NewV3(zap.NewNop()).Restore(etcdutl.RestoreConfig{
				SnapshotPath: raw, Name: "b", OutputDataDir: theirs, PeerURLs: []string{"http://10.0.0.2:2380"},
				InitialCluster: cluster, InitialClusterToken: "tok", SkipHashCheck: true,
				RevisionBump: bump, MarkCompacted: bump > 0,
			}); err != nil {
				t.Fatal(err)
			}
			if a, b := buckets(t, ours), buckets(t, theirs); a != b {
				t.Fatalf("the databases differ:\nours:\n%s\netcdutl's:\n%s", a, b)
			}
			if a, b := walOf(t, ours), walOf(t, theirs); a != b {
				t.Fatalf("the WALs differ:\nours:   %s\netcdutl: %s", a, b)
			}
			if a, b := raftSnapshot(t, ours), raftSnapshot(t, theirs); a != b {
				t.Fatalf("the raft snapshots differ:\nours:   %s\netcdutl: %s", a, b)
			}
		})
	}
}

// buckets prints every bucket's keys and values of a data dir's database.
func buckets(t *testing.T, dataDir string) string {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dataDir, "member", "snap", "db"), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var out bytes.Buffer
	if err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				fmt.Fprintf(&out, "%s %x %x\n", name, k, v)
				return nil
			})
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func walOf(t *testing.T, dataDir string) string {
	t.Helper()
	w, err := wal.OpenForRead(zap.NewNop(), filepath.Join(dataDir, "member", "wal"), &walpb.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	meta, state, entries, err := w.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("metadata %x state %v", meta, state)
	for _, e := range entries {
		out += fmt.Sprintf(" entry %v", e)
	}
	return out
}

func raftSnapshot(t *testing.T, dataDir string) string {
	t.Helper()
	s, err := snap.New(zap.NewNop(), filepath.Join(dataDir, "member", "snap")).Load()
	if err != nil {
		t.Fatal(err)
	}
	// The v2 store in Data numbers the members in the order etcdutl's
	// own runs add them, which varies: the members and their attributes
	// are what must agree.
	meta, err := proto.Marshal(s.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	attrs := regexp.MustCompile(`"Path":"(/0/members/[0-9a-f]+/raftAttributes)","CreatedIndex":\d+,"ModifiedIndex":\d+,"ExpireTime":"[^"]*","Value":"((?:[^"\\]|\\.)*)"`).FindAllSubmatch(s.Data, -1)
	var members []string
	for _, a := range attrs {
		members = append(members, string(a[1])+"="+string(a[2]))
	}
	slices.Sort(members)
	if len(members) == 0 {
		t.Fatalf("no members in the raft snapshot of %s", dataDir)
	}
	return fmt.Sprintf("metadata %x members %v", meta, members)
}
