package history_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tenant"
)

// A prefix deleted from a live cluster is read back from the backups as
// it was, diffed against now, and undeleted: absent keys come back with
// their past values, a key written again since is reported and left.
func TestReadDiffAndUndeleteFromBackups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{TLS: true})
	cli := c.Client(t)
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (etcdtest.Workload{Ops: 100, Prefix: "/other/", Seed: 61}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		opts := []clientv3.OpOption{}
		if i == 7 {
			opts = append(opts, clientv3.WithLease(lease.ID))
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("/ns/a/k%d", i), fmt.Sprintf("v%d", i), opts...); err != nil {
			t.Fatal(err)
		}
	}
	before, err := cli.Get(ctx, "/ns/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	past := before.Header.Revision
	// The accident, then a key made again with another value, and one
	// with the same.
	if _, err := cli.Delete(ctx, "/ns/a/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/ns/a/k3", "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/ns/a/k5", "v5"); err != nil {
		t.Fatal(err)
	}
	if _, err := capture.Delta(ctx, cli, st, full.LastRevision, capture.DeltaOptions{}); err != nil {
		t.Fatal(err)
	}

	prefix := history.Keys{Key: "/ns/a/", Prefix: true}
	then, err := history.ReadState(ctx, st, history.StateOptions{Read: restore.ReadOptions{Target: restore.Target{Revision: past}}, Keys: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if then.Revision != past || len(then.KVs) != len(before.Kvs) {
		t.Fatalf("state at %d: revision %d, %d keys, want %d", past, then.Revision, len(then.KVs), len(before.Kvs))
	}
	for i, kv := range before.Kvs {
		got := then.KVs[i]
		if string(got.Key) != string(kv.Key) || string(got.Value) != string(kv.Value) || got.ModRevision != kv.ModRevision || got.Lease != kv.Lease {
			t.Fatalf("key %d from the backups: %v, live at %d: %v", i, got, past, kv)
		}
	}
	one, err := history.ReadState(ctx, st, history.StateOptions{Keys: history.Keys{Key: "/ns/a/k3"}})
	if err != nil || len(one.KVs) != 1 || string(one.KVs[0].Value) != "new" {
		t.Fatalf("the latest /ns/a/k3: %+v, %v", one.KVs, err)
	}

	now, err := history.ReadState(ctx, st, history.StateOptions{Keys: prefix})
	if err != nil {
		t.Fatal(err)
	}
	changes := history.Diff(then, now)
	var deleted, changed []string
	for _, ch := range changes {
		switch {
		case ch.To == nil:
			deleted = append(deleted, ch.Key)
		case ch.From != nil:
			changed = append(changed, ch.Key)
		default:
			t.Errorf("%s created since, in a diff of deletions", ch.Key)
		}
	}
	if len(deleted) != 8 || !slices.Equal(changed, []string{"/ns/a/k3", "/ns/a/k5"}) {
		t.Fatalf("diff: deleted %v, changed %v", deleted, changed)
	}

	// Both sides of a diff at once: in one replay while the latest chain
	// holds the earlier revision, in two once a newer full is past it.
	sameStates := func(how string) {
		t.Helper()
		a, b, err := history.ReadStates(ctx, st, history.StateOptions{Keys: prefix}, past)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		for _, c := range []struct{ got, want history.State }{{a, then}, {b, now}} {
			if c.got.Revision != c.want.Revision || fmt.Sprint(c.got.KVs) != fmt.Sprint(c.want.KVs) {
				t.Fatalf("%s: the state at %d: %v, read alone at %d: %v", how, c.got.Revision, c.got.KVs, c.want.Revision, c.want.KVs)
			}
		}
	}
	sameStates("one replay")
	if _, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	sameStates("a replay each")
	if _, _, err := history.ReadStates(ctx, st, history.StateOptions{Keys: prefix}, now.Revision+1); err == nil {
		t.Fatal("a diff from a revision after the latest was read")
	}

	dry, err := tenant.Undelete(ctx, cli, then, tenant.UndeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dry.Written, deleted) || !slices.Equal(dry.Changed, []string{"/ns/a/k3"}) || !slices.Equal(dry.Same, []string{"/ns/a/k5"}) ||
		!slices.Equal(dry.WithoutLease, []string{"/ns/a/k7"}) {
		t.Fatalf("dry run: %+v", dry)
	}
	if resp, err := cli.Get(ctx, "/ns/a/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 2 {
		t.Fatalf("the dry run wrote: %d keys, %v", resp.Count, err)
	}
	done, err := tenant.Undelete(ctx, cli, then, tenant.UndeleteOptions{Apply: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done.Written, dry.Written) || !slices.Equal(done.Changed, dry.Changed) {
		t.Fatalf("applied: %+v, the dry run said %+v", done, dry)
	}
	after, err := cli.Get(ctx, "/ns/a/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range after.Kvs {
		want := fmt.Sprintf("v%d", i)
		if i == 3 {
			want = "new"
		}
		if string(kv.Value) != want {
			t.Errorf("%s after the undelete: %q, want %q", kv.Key, kv.Value, want)
		}
	}
	if len(after.Kvs) != 10 {
		t.Fatalf("%d keys after the undelete, want 10", len(after.Kvs))
	}
}
