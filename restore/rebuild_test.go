package restore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/validate"
)

// A data dir etcd 3.5 wrote (validate's fixture: etcd-backup-restore
// 3.5.27 restored 20 keys at revision 21) is rebuilt from its own database
// into one etcd 3.7 starts and serves, with the keyspace and revision as
// they were; the old one is moved aside, unchanged.
func TestRebuildEtcd35DataDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dir, os.DirFS("../validate/testdata/etcd35")); err != nil {
		t.Fatal(err)
	}
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	res, err := restore.Rebuild(ctx, restore.Options{Member: member.Spec{DataDir: dir, Name: "etcd-main-0", PeerURLs: []string{peer.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Revision != 21 || res.MovedAside == "" {
		t.Fatalf("rebuilt: %+v", res)
	}
	if r, err := validate.DataDir(ctx, res.MovedAside, validate.Options{}); err != nil || r.Release.V2Entries != 2 {
		t.Fatalf("the moved-aside data dir: %+v, %v", r, err)
	}
	if r, err := validate.DataDir(ctx, dir, validate.Options{Mode: validate.Full}); err != nil || r.Verdict != validate.Valid {
		t.Fatalf("the rebuilt data dir: %s %s, %v", r.Verdict, r.Reason, err)
	}
	c := etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true}, "etcd-main-0", dir, peer)
	got, err := c.Client(t).Get(ctx, "rv", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || got.Count != 20 || got.Header.Revision != 21 {
		t.Fatalf("the rebuilt member serves %d keys at revision %d (%v), want 20 at 21", got.Count, got.Header.Revision, err)
	}
}
