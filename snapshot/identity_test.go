package snapshot

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// The records (identities, timelines, restores) are invisible to
// etcd-backup-restore, whose listers consider only keys containing "v1"
// or "v2" (pkg/snapstore), and to the catalog's snapshots; each is
// written once, under a name of its own.
func TestRecords(t *testing.T) {
	ctx := context.Background()
	st := store.NewMem()
	full := Snapshot{Kind: KindFull, LastRevision: 51, Created: time.Unix(1796086333, 0), Key: "v2/Full-00000000-00000051-1796086333"}
	if err := st.Put(ctx, full.Key, bytes.NewReader([]byte("db"))); err != nil {
		t.Fatal(err)
	}
	if err := WriteIdentity(ctx, st, full, Identity{ClusterID: "a", MemberIDs: []string{"1"}, EtcdVersion: "3.7.0"}); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := ReadIdentity(ctx, st, full); err != nil || !ok || id.ClusterID != "a" || id.Revision != 51 {
		t.Fatalf("identity read back: %+v %v %v", id, ok, err)
	}
	// The same record again is no error; another is a conflict.
	if err := WriteIdentity(ctx, st, full, Identity{ClusterID: "a", MemberIDs: []string{"1"}, EtcdVersion: "3.7.0"}); err != nil {
		t.Fatalf("the same identity again: %v", err)
	}
	if err := WriteIdentity(ctx, st, full, Identity{ClusterID: "b"}); err == nil {
		t.Fatal("another identity for the same full was written")
	}
	tl, err := BeginTimeline(ctx, st, Timeline{Parent: FirstTimeline, ForkRevision: 51, ClusterID: "a"}, time.Unix(1796086400, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range []Restored{
		{ClusterID: "a", Timeline: FirstTimeline, Snapshot: full.Key, Revision: 40, TimelineEnd: 51, Created: time.Unix(1796086390, 0)},
		{ClusterID: "a", Timeline: tl.ID, Snapshot: full.Key, Revision: 51, TimelineEnd: 51, Created: time.Unix(1796086500, 0)},
		{ClusterID: "ab", Timeline: tl.ID, Snapshot: full.Key, Revision: 7, TimelineEnd: 51, Created: time.Unix(1796086600, 0)},
	} {
		if err := RecordRestore(ctx, st, r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if r, ok, err := LastRestore(ctx, st, "a"); err != nil || !ok || r.Timeline != tl.ID || r.Fork() {
		t.Fatalf("the newest restore of a: %+v %v %v", r, ok, err)
	}
	if _, ok, err := LastRestore(ctx, st, "b"); err != nil || ok {
		t.Fatalf("no restore of b: %v %v", ok, err)
	}
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		ebrLists := strings.Contains(o.Key, "v1") || strings.Contains(o.Key, "v2")
		if ebrLists != (o.Key == full.Key) {
			t.Errorf("%s: etcd-backup-restore would list it: %v", o.Key, ebrLists)
		}
	}
	cat, err := List(ctx, st)
	if err != nil || len(cat.Snapshots) != 1 || len(cat.Timelines) != 2 || cat.Timeline.ID != tl.ID || cat.Timeline.ForkRevision != 51 {
		t.Fatalf("catalog: %+v %v", cat, err)
	}
}
