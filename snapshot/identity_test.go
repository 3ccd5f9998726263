package snapshot

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// The identity records are invisible to etcd-backup-restore, whose
// listers consider only keys containing "v1" or "v2" (pkg/snapstore),
// and to the catalog; a chain restored into a new cluster, and restored
// again, stays that new cluster's to continue.
func TestIdentity(t *testing.T) {
	ctx := context.Background()
	st := store.NewMem()
	full := Snapshot{Kind: KindFull, LastRevision: 51, Created: time.Unix(1796086333, 0), Key: "v2/Full-00000000-00000051-1796086333"}
	if err := st.Put(ctx, full.Key, bytes.NewReader([]byte("db"))); err != nil {
		t.Fatal(err)
	}
	chain := Chain{Full: full}
	if err := CheckChain(ctx, st, chain, "b"); err != nil {
		t.Fatalf("a chain without identity is nobody's: %v", err)
	}
	if err := WriteIdentity(ctx, st, full, Identity{ClusterID: "a", MemberIDs: []string{"1"}, EtcdVersion: "3.7.0"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckChain(ctx, st, chain, "a"); err != nil {
		t.Fatalf("its own cluster: %v", err)
	}
	if err := CheckChain(ctx, st, chain, "b"); !errors.Is(err, ErrOtherCluster) || !strings.Contains(err.Error(), "taken of cluster a, this is cluster b") {
		t.Fatalf("another cluster: %v", err)
	}
	// b restored from a's chain, c from b's restore.
	if err := RecordRestore(ctx, st, "b", chain); err != nil {
		t.Fatal(err)
	}
	if err := putJSON(ctx, st, clusterKey("c"), Identity{ClusterID: "c", Continues: "b"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "c"} {
		if err := CheckChain(ctx, st, chain, id); err != nil {
			t.Fatalf("cluster %s, restored from the chain: %v", id, err)
		}
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
	if err != nil || len(cat) != 1 {
		t.Fatalf("catalog: %v %v", cat, err)
	}
}
