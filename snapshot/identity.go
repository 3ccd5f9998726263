package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/store"
)

// ErrOtherCluster: the store's latest chain holds another cluster's
// backups. Appending to it would mix two keyspaces in one chain.
var ErrOtherCluster = errors.New("the store's latest chain is another cluster's")

// identityDir holds the identity records, apart from v1/ and v2/:
// etcd-backup-restore lists only keys that contain "v1" or "v2", so it
// never sees them, and etcdkit's catalog lists only those two.
const identityDir = "etcdkit/identity"

// Identity is the cluster a chain's snapshots were taken of, recorded
// beside its full snapshot when the full is written. A chain without one
// (older, or written by etcd-backup-restore) is nobody's in particular.
type Identity struct {
	// ClusterID and MemberIDs in hex, as etcdctl prints them.
	ClusterID   string   `json:"cluster_id"`
	MemberIDs   []string `json:"member_ids,omitempty"`
	EtcdVersion string   `json:"etcd_version,omitempty"`
	// Snapshot is the full snapshot's key; Revision its revision.
	Snapshot string `json:"snapshot,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	// Continues, on the record a restore writes for the cluster it builds,
	// is the cluster whose chain that cluster was restored from: its
	// sidecar may go on appending to that chain.
	Continues string    `json:"continues,omitempty"`
	Created   time.Time `json:"created"`
}

// IdentityOf asks the cluster cli reaches for its identity.
func IdentityOf(ctx context.Context, cli *clientv3.Client) (Identity, error) {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return Identity{}, fmt.Errorf("cluster identity: %w", err)
	}
	id := Identity{ClusterID: hexID(list.Header.ClusterId), Created: time.Now().UTC()}
	for _, m := range list.Members {
		id.MemberIDs = append(id.MemberIDs, hexID(m.ID))
	}
	slices.Sort(id.MemberIDs)
	for _, ep := range cli.Endpoints() {
		if st, err := cli.Status(ctx, ep); err == nil {
			id.EtcdVersion = st.Version
			break
		}
	}
	return id, nil
}

func hexID(id uint64) string { return strconv.FormatUint(id, 16) }

// identityKey is where the identity of the chain that full starts is kept.
func identityKey(full Snapshot) string {
	return fmt.Sprintf("%s/Full-%08d-%08d-%d.json", identityDir, full.StartRevision, full.LastRevision, full.Created.Unix())
}

// clusterKey is where a restore records which chain a cluster continues.
func clusterKey(clusterID string) string { return identityDir + "/cluster-" + clusterID + ".json" }

// WriteIdentity records id as the identity of the chain full starts.
func WriteIdentity(ctx context.Context, st store.Store, full Snapshot, id Identity) error {
	id.Snapshot, id.Revision = full.Key, full.LastRevision
	return putJSON(ctx, st, identityKey(full), id)
}

// ReadIdentity reads the identity of the chain full starts; ok is false
// when it has none.
func ReadIdentity(ctx context.Context, st store.Store, full Snapshot) (id Identity, ok bool, err error) {
	return getJSON[Identity](ctx, st, identityKey(full))
}

// RecordRestore records that the cluster clusterID was restored from
// chain, so that its sidecar appends to chain instead of refusing it as
// another cluster's. A chain without an identity needs no record.
func RecordRestore(ctx context.Context, st store.Store, clusterID string, chain Chain) error {
	from, ok, err := ReadIdentity(ctx, st, chain.Full)
	if err != nil || !ok {
		return err
	}
	rec := Identity{ClusterID: clusterID, Continues: from.ClusterID, Snapshot: chain.Full.Key, Revision: chain.LastRevision(), Created: time.Now().UTC()}
	return putJSON(ctx, st, clusterKey(clusterID), rec)
}

// CheckChain fails with ErrOtherCluster unless chain may be continued by
// the cluster clusterID: the chain has no identity, it is that cluster's,
// or that cluster was restored from it (or from a cluster restored from
// it, and so on).
func CheckChain(ctx context.Context, st store.Store, chain Chain, clusterID string) error {
	id, ok, err := ReadIdentity(ctx, st, chain.Full)
	if err != nil || !ok || id.ClusterID == clusterID {
		return err
	}
	// Follow the restores back from the cluster asking, a few steps.
	seen := clusterID
	for range 8 {
		rec, ok, err := getJSON[Identity](ctx, st, clusterKey(seen))
		if err != nil {
			return err
		}
		if !ok || rec.Continues == "" {
			break
		}
		if rec.Continues == id.ClusterID {
			return nil
		}
		seen = rec.Continues
	}
	return fmt.Errorf("%w: %s was taken of cluster %s, this is cluster %s: point the store at another prefix, or start a new chain here on purpose",
		ErrOtherCluster, chain.Full.Key, id.ClusterID, clusterID)
}

func putJSON(ctx context.Context, st store.Store, key string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return st.Put(ctx, key, bytes.NewReader(b))
}

func getJSON[T any](ctx context.Context, st store.Store, key string) (v T, ok bool, err error) {
	rc, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return v, false, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, false, fmt.Errorf("identity %s: %w", strings.TrimPrefix(key, identityDir+"/"), err)
	}
	return v, true, nil
}
