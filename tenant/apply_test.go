package tenant_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tenant"
)

// tenantUser adds a user whose role may read and write the keys under
// prefix alone, and returns a client logged in as it.
func tenantUser(t *testing.T, ctx context.Context, c *etcdtest.Cluster, root *clientv3.Client, name, prefix string) *clientv3.Client {
	t.Helper()
	pw := filepath.Join(t.TempDir(), name+".password")
	if err := os.WriteFile(pw, []byte("secret-"+name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := []func() error{
		func() error { _, err := root.RoleAdd(ctx, name); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, name, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, name, "secret-"+name); return err },
		func() error { _, err := root.UserGrantRole(ctx, name, name); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: c.Endpoints(), TLS: c.Security.TLSFiles(), User: name, PasswordFile: pw})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// keyValues reads the keys under prefix as key=value lines.
func keyValues(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key)+"="+string(kv.Value))
	}
	return out
}

// A tenant's keys are put back into its live cluster as they were, by a
// user who may touch only them, over TLS: a dry run writes nothing and
// says what would change; the applied restore writes the past values,
// deletes what the past did not have (Replace), leaves a key another
// writer changed meanwhile, grants the leases again, and touches nothing
// outside the prefix. The same past copied into a second cluster under
// another prefix, and restored into a data dir of its own, holds exactly
// the tenant's keys.
func TestATenantsKeysRestoredCopiedAndMadeAClusterOfTheirOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true})
	root := c.Client(t)
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (etcdtest.Workload{Ops: 60, Prefix: "/t/ab/", Seed: 71}).Run(ctx, root); err != nil {
		t.Fatal(err)
	}
	// The tenant's user, whose role holds its prefix alone.
	tenantA := tenantUser(t, ctx, c, root, "tenant-a", "/t/a/")
	full, err := capture.Full(ctx, root, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := root.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		var opts []clientv3.OpOption
		if i%4 == 1 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		if _, err := root.Put(ctx, fmt.Sprintf("/t/a/k%02d", i), fmt.Sprintf("v%d", i), opts...); err != nil {
			t.Fatal(err)
		}
	}
	then, err := root.Get(ctx, "/t/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	past := then.Header.Revision
	want := keyValues(t, ctx, root, "/t/a/")
	// What the tenant did since: a key deleted, one changed, one added,
	// and its neighbour's keys (a prefix that starts alike) changed too.
	for _, op := range []clientv3.Op{clientv3.OpDelete("/t/a/k01"), clientv3.OpPut("/t/a/k04", "changed"),
		clientv3.OpPut("/t/a/k20", "new"), clientv3.OpPut("/t/ab/x", "neighbour")} {
		if _, err := root.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := capture.Delta(ctx, root, st, full.LastRevision, capture.DeltaOptions{}); err != nil {
		t.Fatal(err)
	}
	state, err := history.ReadState(ctx, st, history.StateOptions{Read: restore.ReadOptions{Target: restore.Target{Revision: past}},
		Keys: history.Keys{Key: "/t/a/", Prefix: true}})
	if err != nil {
		t.Fatal(err)
	}
	if ttl := state.Leases[int64(lease.ID)]; len(state.KVs) != 12 || ttl != 3600 {
		t.Fatalf("past state: %d keys, lease TTL %d; want 12 keys and 3600", len(state.KVs), ttl)
	}
	neighbours := keyValues(t, ctx, root, "/t/ab/")

	dry, err := tenant.ApplyState(ctx, tenantA, state, "/t/a/", tenant.ApplyOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	after, err := root.Get(ctx, "/t/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Revision != dry.Revision {
		t.Fatalf("the dry run wrote: the revision went from %d to %d", dry.Revision, after.Header.Revision)
	}
	if !slices.Equal(dry.Created, []string{"/t/a/k01"}) || !slices.Equal(dry.Overwritten, []string{"/t/a/k04"}) ||
		!slices.Equal(dry.Deleted, []string{"/t/a/k20"}) || len(dry.Same) != 10 || dry.Leases != 1 {
		t.Fatalf("dry run: %+v", dry)
	}

	// Another writer changes a key after the read: its write stands.
	opts := tenant.WithBeforeWrite(tenant.ApplyOptions{Apply: true, Replace: true}, func() {
		if _, err := root.Put(ctx, "/t/a/k04", "concurrent"); err != nil {
			t.Error(err)
		}
	})
	applied, err := tenant.ApplyState(ctx, tenantA, state, "/t/a/", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied.Conflicts, []string{"/t/a/k04"}) || !slices.Equal(applied.Created, []string{"/t/a/k01"}) ||
		!slices.Equal(applied.Deleted, []string{"/t/a/k20"}) || len(applied.Overwritten) != 0 {
		t.Fatalf("applied: %+v", applied)
	}
	got := keyValues(t, ctx, root, "/t/a/")
	wantNow := slices.Clone(want)
	wantNow[slices.Index(wantNow, "/t/a/k04=v4")] = "/t/a/k04=concurrent"
	if !slices.Equal(got, wantNow) {
		t.Fatalf("after the restore: %v\nwant %v", got, wantNow)
	}
	if now := keyValues(t, ctx, root, "/t/ab/"); !slices.Equal(now, neighbours) {
		t.Fatalf("the neighbour's keys changed: %v, were %v", now, neighbours)
	}
	// The recreated key had a lease, which still lives: the key joins it
	// again, as the keys left as they were kept it.
	if err := checkLeased(ctx, root, "/t/a/k01", 3600); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"/t/a/k01", "/t/a/k05"} {
		resp, err := root.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease != int64(lease.ID) {
			t.Fatalf("%s: %v, %v; want it under lease %x", key, resp, err, lease.ID)
		}
	}

	// Copied under another name into a second cluster.
	c2 := etcdtest.Start(t, etcdtest.Options{TLS: true, Auth: true})
	root2 := c2.Client(t)
	tenantB := tenantUser(t, ctx, c2, root2, "tenant-b", "/t/b/")
	rename, err := restore.ParseRename("/t/a/=/t/b/")
	if err != nil {
		t.Fatal(err)
	}
	copied, err := tenant.ApplyState(ctx, tenantB, state, "/t/a/", tenant.ApplyOptions{Apply: true, Rename: rename})
	if err != nil {
		t.Fatal(err)
	}
	if len(copied.Created) != 12 || copied.Leases != 1 {
		t.Fatalf("copy: %+v", copied)
	}
	renamed := func(kvs []string) []string {
		out := make([]string, len(kvs))
		for i, kv := range kvs {
			out[i] = "/t/b/" + kv[len("/t/a/"):]
		}
		return out
	}
	if got := keyValues(t, ctx, root2, "/t/"); !slices.Equal(got, renamed(want)) {
		t.Fatalf("the copy: %v\nwant %v", got, renamed(want))
	}
	// In another cluster the lease is granted under its ID: the tenant's
	// clients keep it alive by the ID they know.
	if err := checkLeased(ctx, root2, "/t/b/k01", 3600); err != nil {
		t.Fatal(err)
	}
	if resp, err := root2.Get(ctx, "/t/b/k01"); err != nil || resp.Kvs[0].Lease != int64(lease.ID) {
		t.Fatalf("/t/b/k01 in the copy: %v, %v; want lease %x", resp, err, lease.ID)
	}
	if _, err := tenant.ApplyState(ctx, tenantB, state, "/t/a/", tenant.ApplyOptions{Apply: true}); err == nil {
		t.Fatal("a user without access to /t/a/ on the second cluster wrote there")
	}

	// A cluster of its own: the data dir holds the tenant's keys alone,
	// at their revisions, with the lease, renamed.
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	dir := filepath.Join(t.TempDir(), "data")
	res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dir, Name: "tenant", PeerURLs: []string{peer.String()}}, Read: restore.ReadOptions{Target: restore.Target{Revision: past}}, Prefix: "/t/a/", Rename: restore.Rename{From: "/t/a/", To: "/t/c/"}})
	if err != nil {
		t.Fatal(err)
	}
	own := etcdtest.StartDataDir(t, etcdtest.Options{TLS: true, Security: c.Security}, "tenant", dir, peer)
	ocli := own.Client(t)
	all, err := ocli.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	if all.Header.Revision != res.Revision || len(all.Kvs) != len(then.Kvs) {
		t.Fatalf("tenant's cluster at revision %d with %d keys; want %d and %d", all.Header.Revision, len(all.Kvs), res.Revision, len(then.Kvs))
	}
	for i, kv := range all.Kvs {
		was := then.Kvs[i]
		if string(kv.Key) != "/t/c/"+string(was.Key[len("/t/a/"):]) || string(kv.Value) != string(was.Value) ||
			kv.ModRevision != was.ModRevision || kv.CreateRevision != was.CreateRevision || kv.Lease != was.Lease {
			t.Fatalf("tenant's cluster holds %v; the past held %v", kv, was)
		}
	}
	if err := checkLeased(ctx, ocli, "/t/c/k01", 3600); err != nil {
		t.Fatal(err)
	}
	// Its users: root, and the users whose roles hold the tenant's keys
	// alone, their permissions renamed with the keys; the reader, who may
	// read every key, is left out.
	users, err := ocli.UserList(ctx)
	if err != nil || !slices.Equal(users.Users, []string{"backup", "root", "tenant-a"}) || !slices.Equal(res.UsersLeftOut, []string{"reader"}) ||
		!slices.Equal(res.RolesLeftOut, []string{"reader"}) {
		t.Fatalf("users of the tenant's cluster: %v, %v; left out %v and roles %v", users, err, res.UsersLeftOut, res.RolesLeftOut)
	}
	role, err := ocli.RoleGet(ctx, "tenant-a")
	if err != nil || len(role.Perm) != 1 || string(role.Perm[0].Key) != "/t/c/" || string(role.Perm[0].RangeEnd) != clientv3.GetPrefixRangeEnd("/t/c/") {
		t.Fatalf("the tenant's role in its cluster: %v, %v", role, err)
	}
	leases, err := ocli.Leases(ctx)
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("leases of the tenant's cluster: %v, %v; want its one", leases, err)
	}
	if _, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "d")}, Prefix: "/t/", Rename: restore.Rename{From: "/t/a/", To: "/t/c/"}}); err == nil {
		t.Fatal("a rename that leaves keys of the prefix unrenamed was accepted")
	}
}

// checkLeased says whether key is attached to a lease granted for ttl
// seconds.
func checkLeased(ctx context.Context, cli *clientv3.Client, key string, ttl int64) error {
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		return fmt.Errorf("%s: no lease", key)
	}
	l, err := cli.TimeToLive(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		return err
	}
	if l.GrantedTTL != ttl || l.TTL <= 0 {
		return fmt.Errorf("%s: lease of %d s, %d s left; want %d", key, l.GrantedTTL, l.TTL, ttl)
	}
	return nil
}
