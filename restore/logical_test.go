package restore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tenant"
)

// A datastore behind etcd's API may skip revision numbers (a SQL
// sequence's gaps, rows kine hides from its watchers): a chain begun by a
// logical full replays across them, to the keys the datastore holds. The
// same delta after an etcd snapshot is a lost revision and fails the
// restore; a data dir restored from a logical chain is etcd's own, and
// its next backups are not logical.
func TestLogicalChainSkipsRevisions(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	cli := c.Client(t)
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/k/%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	// The revisions the next delta names come after the full's, with one
	// missing between its two events.
	gapped := func(at int64) []snapshot.Event {
		now := time.Now()
		return []snapshot.Event{
			{EtcdEvent: &snapshot.WatchEvent{Type: snapshot.Put, Kv: &snapshot.KeyValue{Key: []byte("/k/00"), Value: []byte("after"), CreateRevision: 2, ModRevision: at + 1, Version: 1}}, Time: now},
			{EtcdEvent: &snapshot.WatchEvent{Type: snapshot.Delete, Kv: &snapshot.KeyValue{Key: []byte("/k/01"), ModRevision: at + 3}}, Time: now},
		}
	}
	for _, tc := range []struct {
		source  snapshot.SourceKind
		logical bool
	}{{snapshot.SourceEtcdAPI, true}, {snapshot.SourceEtcd, false}} {
		t.Run(string(tc.source), func(t *testing.T) {
			st := store.NewMem()
			src := capture.NewDatastore(tc.source, cli, capture.DatastoreOptions{SpoolDir: t.TempDir(), PageSize: 7})
			full, err := capture.FullOf(ctx, src, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			at := full.LastRevision
			d := snapshot.NewDelta(at+1, at+3, time.Now(), snapshot.Codec{})
			if _, err := snapshot.WriteDelta(ctx, st, d, snapshot.Codec{}, gapped(at), snapshot.Annotations{}); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "data")
			res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dir}})
			if !tc.logical {
				if err == nil || !strings.Contains(err.Error(), "does not continue") {
					t.Fatalf("a revision missing from an etcd chain: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Revision != at+3 {
				t.Fatalf("restored at %d, want %d", res.Revision, at+3)
			}
			state, err := history.ReadState(ctx, st, history.StateOptions{WorkDir: t.TempDir(), Keys: history.Keys{Key: "/k/", Prefix: true}})
			if err != nil {
				t.Fatal(err)
			}
			if len(state.KVs) != 19 || string(state.KVs[0].Value) != "after" || string(state.KVs[1].Key) != "/k/02" {
				t.Fatalf("state after the gap: %d keys, first %s", len(state.KVs), state.KVs[0])
			}
			if logical, err := snapshot.IsLogical(filepath.Join(dir, "member", "snap", "db")); err != nil || logical {
				t.Fatalf("the restored data dir is still marked logical (%v)", err)
			}
		})
	}
}

// kine over SQLite in its own default mode (no _txlock=immediate, which
// k3s adds) answers success to concurrent creates it then drops: a
// restore through its API reads every key back, writes the lost ones again
// and reports only what the datastore holds.
func TestApplyStateReadsBackWhatTheDatastoreLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	k := emulator.RequireKine(t, emulator.KineOptions{Dir: dir, Datastore: "sqlite://" + filepath.Join(dir, "lossy.db") + "?_journal=WAL&cache=shared"})
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{k.KineServer.ClientURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var past history.State
	for i := range 3000 {
		past.KVs = append(past.KVs, &mvccpb.KeyValue{Key: fmt.Appendf(nil, "/registry/k/%05d", i), Value: fmt.Appendf(nil, "value %d", i),
			CreateRevision: 2, ModRevision: 2, Version: 1})
	}
	a, err := tenant.ApplyState(ctx, cli, past, "", tenant.ApplyOptions{Apply: true, KeyByKey: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/registry/k/", clientv3.WithRange("/registry/k0"))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Created) != len(past.KVs) || len(resp.Kvs) != len(past.KVs) {
		t.Fatalf("reported %d created, kine holds %d of %d", len(a.Created), len(resp.Kvs), len(past.KVs))
	}
}
