package restore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/validate"
)

// A member with a dedicated wal-dir is restored into both: the WAL goes to
// the wal-dir, not into the data dir, the old data dir and the old WAL are
// moved aside (never deleted), and etcd starts on the pair.
func TestRestoreIntoADedicatedWALDir(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t, etcdtest.Options{DedicatedWAL: true, UnsafeNoFsync: true})
	cli := c.Client(t)
	if _, err := (etcdtest.Workload{Ops: 100, Seed: 41}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	m.Stop()
	res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: m.Dir, WALDir: m.WALDir, Name: m.Name, PeerURLs: []string{m.PeerURL.String()}, Token: "etcdtest"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{res.MovedAside, res.WALMovedAside, filepath.Join(res.WALMovedAside, "0000000000000000-0000000000000000.wal")} {
		if _, err := os.Stat(p); p == "" || err != nil {
			t.Fatalf("the old data dir and WAL were not moved aside: %q %v (%+v)", p, err, res)
		}
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "member", "wal")); !os.IsNotExist(err) {
		t.Fatalf("the restore wrote a WAL into the data dir: %v", err)
	}
	if r, err := validate.DataDir(ctx, m.Dir, validate.Options{Mode: validate.Full, WALDir: m.WALDir}); err != nil || r.Verdict != validate.Valid {
		t.Fatalf("the restored pair: %s %s %v", r.Verdict, r.Reason, err)
	}
	r := etcdtest.StartDataDir(t, etcdtest.Options{DedicatedWAL: true, UnsafeNoFsync: true}, m.Name, m.Dir, m.PeerURL)
	resp, err := r.Client(t).Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil || resp.Header.Revision != full.LastRevision {
		t.Fatalf("the restored member: %v, %v; want revision %d", resp, err, full.LastRevision)
	}
}
