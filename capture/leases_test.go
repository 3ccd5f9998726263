package capture_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
)

// A short lease (a lock, an event) revoked while no uploader ran — the
// gap of a leader change — is gone when the next uploader sees its key.
// The delta marks it gone, and a restore to a revision where the key
// lived grants it the shortest TTL: the key goes soon after the member
// starts, as it went then, instead of holding a lock for the hour a
// lease of unknown TTL gets. (The fault soak found the hour.)
func TestLeaseGoneBeforeItsKeyIsCaptured(t *testing.T) {
	ctx := ctxT(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	cli := c.Client(t)
	st := newStore(t)
	a := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	a.Await(t, capture.OpFull)
	a.Stop(t)

	l, err := cli.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, "/locks/leader", "holder", clientv3.WithLease(l.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	b := start(t, cli, st, capture.Options{DeltaPeriod: time.Hour})
	first := b.Await(t, capture.OpDelta)
	b.Stop(t)
	var marked bool
	for _, ev := range readDelta(t, st, first.Snapshot, snapshot.Codec{}) {
		if ev.EtcdEvent != nil && ev.EtcdEvent.Kv != nil && string(ev.EtcdEvent.Kv.Key) == "/locks/leader" && ev.EtcdEvent.Type == snapshot.Put {
			marked = ev.LeaseTTL == snapshot.LeaseGone
		}
	}
	if !marked {
		t.Fatalf("the put of a key whose lease was gone is not marked LeaseGone in %s", first.Snapshot.Key)
	}

	dir := filepath.Join(t.TempDir(), "data")
	res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dir}, Read: restore.ReadOptions{Target: restore.Target{Revision: put.Header.Revision}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.GuessedLeases != 0 || res.GrantedLeases != 1 {
		t.Fatalf("leases granted with a recorded TTL %d, with the default %d; want 1, 0", res.GrantedLeases, res.GuessedLeases)
	}
	db, err := bolt.Open(filepath.Join(dir, "member", "snap", "db"), 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var ttl int64 = -1
	if err := db.View(func(tx *bolt.Tx) error {
		var id [8]byte
		binary.BigEndian.PutUint64(id[:], uint64(l.ID))
		var lp leasepb.Lease
		if v := tx.Bucket([]byte("lease")).Get(id[:]); v != nil {
			if err := proto.Unmarshal(v, &lp); err != nil {
				return err
			}
			ttl = lp.TTL
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ttl != 1 {
		t.Fatalf("the gone lease is restored with TTL %d, want 1 (the shortest)", ttl)
	}
}
