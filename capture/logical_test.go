package capture_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// kineCreate writes key as kube-apiserver creates objects through kine: a
// Txn whose one compare is the key's absence.
func kineCreate(ctx context.Context, t *testing.T, cli *clientv3.Client, key, value string, opts ...clientv3.OpOption) int64 {
	t.Helper()
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, value, opts...)).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("create %s: %v (succeeded %v)", key, err, resp != nil && resp.Succeeded)
	}
	return resp.Header.Revision
}

// A logical full of kine over SQLite is an etcd database of the keyspace
// at one revision: every key with its create and mod revision, a version
// where kine keeps none, its lease with kine's TTL, compacted at the
// revision, and named with it.
func TestLogicalFullOfKine(t *testing.T) {
	k := emulator.RequireKine(t, emulator.KineOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cli, err := etcdclient.New(t.Context(), etcdclient.Config{Endpoints: []string{k.KineServer.ClientURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	lease, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2500 {
		var opts []clientv3.OpOption
		if i%100 == 0 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		kineCreate(ctx, t, cli, fmt.Sprintf("/registry/things/%05d", i), fmt.Sprintf("value %d", i), opts...)
	}
	// Binary keys above every text key: kine over SQLite holds them too.
	kineCreate(ctx, t, cli, "\xffraw", "high")
	kineCreate(ctx, t, cli, "\xf4\x90zz", "beyond the last code point")
	want, err := cli.Get(ctx, "/registry/", clientv3.WithRange("/registry0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"\xffraw", "\xf4\x90zz"} {
		resp, err := cli.Get(ctx, k)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("kine holds no %q: %v", k, err)
		}
		want.Kvs = append(want.Kvs, resp.Kvs[0])
	}
	st := store.NewMem()
	src := capture.NewDatastore(snapshot.SourceEtcdAPI, cli, capture.DatastoreOptions{SpoolDir: t.TempDir(), PageSize: 300})
	full, err := capture.FullOf(ctx, src, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if full.LastRevision != want.Header.Revision {
		t.Fatalf("full named at revision %d, kine was at %d", full.LastRevision, want.Header.Revision)
	}
	id, ok, err := snapshot.ReadIdentity(ctx, st, full)
	if err != nil || !ok {
		t.Fatalf("identity: %v %v", ok, err)
	}
	if id.Source != snapshot.SourceEtcdAPI || id.Logical == nil || !id.Logical.NoVersions || id.Logical.LeaseTTLs != "lease-id" || id.Logical.Leases != 1 {
		t.Fatalf("identity %+v, logical %+v", id, id.Logical)
	}
	db := fetchDB(ctx, t, st, full)
	got := map[string]*mvccpb.KeyValue{}
	var leaseTTL int64
	bdb, err := bolt.Open(db, 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bdb.Close() }()
	_ = bdb.View(func(tx *bolt.Tx) error {
		_ = tx.Bucket([]byte("key")).ForEach(func(_, v []byte) error {
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(v, &kv); err != nil {
				t.Fatal(err)
			}
			got[string(kv.Key)] = &kv
			return nil
		})
		_ = tx.Bucket([]byte("lease")).ForEach(func(_, v []byte) error {
			// leasepb.Lease: ID (1) and TTL (2), varints.
			for len(v) > 0 {
				num, _, n := protowire.ConsumeTag(v)
				x, m := protowire.ConsumeVarint(v[n:])
				if num == 2 {
					leaseTTL = int64(x)
				}
				v = v[n+m:]
			}
			return nil
		})
		return nil
	})
	for _, kv := range want.Kvs {
		g := got[string(kv.Key)]
		if g == nil || string(g.Value) != string(kv.Value) || g.CreateRevision != kv.CreateRevision || g.ModRevision != kv.ModRevision || g.Lease != kv.Lease || g.Version != 1 {
			t.Fatalf("key %s: got %v, kine holds %v", kv.Key, g, kv)
		}
	}
	if leaseTTL != 600 {
		t.Fatalf("lease TTL %d recorded, granted 600", leaseTTL)
	}
	if rev, err := snapshot.DatabaseRevision(db); err != nil || rev != full.LastRevision {
		t.Fatalf("database revision %d (%v), named %d", rev, err, full.LastRevision)
	}
	if logical, err := snapshot.IsLogical(db); err != nil || !logical {
		t.Fatalf("not marked logical: %v", err)
	}
}

// fetchDB writes full's database into a file of the test's.
func fetchDB(ctx context.Context, t *testing.T, st store.Store, full snapshot.Snapshot) string {
	t.Helper()
	rc, err := snapshot.Open(ctx, st, full, snapshot.Codec{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	path := filepath.Join(t.TempDir(), "db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// A logical full of etcd itself, streamed (3.7's RangeStream) or paged
// (3.6 has none): every key as the member holds it at the full's revision,
// binary keys above every text key among them, the keys a transaction
// wrote at one revision each at its place, versions and leases kept.
func TestLogicalFullOfEtcd(t *testing.T) {
	for _, tc := range []struct {
		name string
		cli  func(t *testing.T) *clientv3.Client
	}{
		{"3.7, streamed", func(t *testing.T) *clientv3.Client {
			return etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true}).Client(t)
		}},
		{"3.6, paged", func(t *testing.T) *clientv3.Client {
			s := emulator.RequireEtcd(t, emulator.Etcd36, emulator.EtcdOptions{})
			cli, err := etcdclient.New(t.Context(), etcdclient.Config{Endpoints: []string{s.Etcd.ClientURL}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cli.Close() })
			return cli
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cli := tc.cli(t)
			lease, err := cli.Grant(ctx, 900)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				if _, err := cli.Put(ctx, fmt.Sprintf("/k/%02d", i%25), fmt.Sprint(i)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/t/b", "1", clientv3.WithLease(lease.ID)), clientv3.OpPut("/t/a", "2"), clientv3.OpPut("\xff\xfe", "binary")).Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Delete(ctx, "/k/03"); err != nil {
				t.Fatal(err)
			}
			want, err := cli.Get(ctx, "\x00", clientv3.WithFromKey())
			if err != nil {
				t.Fatal(err)
			}
			st := store.NewMem()
			src := capture.NewDatastore(snapshot.SourceEtcdAPI, cli, capture.DatastoreOptions{SpoolDir: t.TempDir(), PageSize: 7})
			full, err := capture.FullOf(ctx, src, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if full.LastRevision != want.Header.Revision {
				t.Fatalf("full at %d, the member at %d", full.LastRevision, want.Header.Revision)
			}
			got := map[string]*mvccpb.KeyValue{}
			db, err := bolt.Open(fetchDB(ctx, t, st, full), 0o400, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			subs := map[int64]int{}
			_ = db.View(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("key")).ForEach(func(k, v []byte) error {
					var kv mvccpb.KeyValue
					if err := proto.Unmarshal(v, &kv); err != nil {
						return err
					}
					subs[kv.ModRevision]++
					got[string(kv.Key)] = &kv
					return nil
				})
			})
			if len(got) != len(want.Kvs) || subs[want.Header.Revision-1] != 3 {
				t.Fatalf("%d keys in the full, %d in the member; %d at the transaction's revision", len(got), len(want.Kvs), subs[want.Header.Revision-1])
			}
			for _, w := range want.Kvs {
				if g := got[string(w.Key)]; g == nil || !proto.Equal(g, w) {
					t.Fatalf("key %q: the full holds %v, the member %v", w.Key, g, w)
				}
			}
		})
	}
}
