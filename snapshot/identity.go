package snapshot

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// ErrOtherCluster: the store's newest chain holds another cluster's
// backups. Appending to it would mix two keyspaces in one chain.
var ErrOtherCluster = errors.New("the store's newest chain is another cluster's")

// Identity is the cluster a chain's snapshots were taken of, recorded
// beside its full snapshot when the full is written, or when a sidecar
// found a chain without one to be its cluster's past (Adopted). A chain
// without one (written by etcd-backup-restore, copied, or older) is
// compared with a cluster by its own data before the cluster appends.
type Identity struct {
	// ClusterID and MemberIDs in hex, as etcdctl prints them.
	ClusterID   string   `json:"cluster_id"`
	MemberIDs   []string `json:"member_ids,omitempty"`
	EtcdVersion string   `json:"etcd_version,omitempty"`
	// Snapshot is the full snapshot's key; Revision its revision.
	Snapshot string `json:"snapshot,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	// Tail is what the newest revisions of the full left of their keys:
	// a cluster that continues the chain holds the same at Revision.
	Tail []KeyVersion `json:"tail,omitempty"`
	// Adopted: written after the full, by a sidecar whose cluster's keys
	// matched the chain's end.
	Adopted bool      `json:"adopted,omitempty"`
	Created time.Time `json:"created"`
	// Continues was written by older versions on a record of the cluster
	// a restore built (cluster-<id>.json): the cluster whose chain it was
	// restored from. Read, never written.
	Continues string `json:"continues,omitempty"`
	// Source is what the chain was taken of: "" for an etcd cluster,
	// SourceEtcdAPI for a datastore behind etcd's API.
	Source SourceKind `json:"source,omitempty"`
	// Logical is set when the full was built from a Range (Source
	// SourceEtcdAPI): what it holds and cannot hold.
	Logical *Logical `json:"logical,omitempty"`
}

// identityKey is where the identity of the chain that full starts is kept.
func identityKey(full Snapshot) string {
	return fmt.Sprintf("%s/Full-%08d-%08d-%d.json", identityDir, full.StartRevision, full.LastRevision, full.Created.Unix())
}

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

// Restored is what a restore records of the cluster it built: which
// chain, of which timeline, it was restored from and to which revision,
// and where that timeline ended then. Its sidecar continues the timeline
// only when the restore reached that end and nothing was written since;
// any other restore is a fork, and the sidecar begins a timeline of its
// own that says where it forked.
type Restored struct {
	// ClusterID (hex) is the restored cluster's: etcd derives it from the
	// initial cluster and its token, so a restore with the same ones gives
	// the same ID as the cluster it replaces.
	ClusterID string `json:"cluster_id"`
	// Timeline, Snapshot: the chain restored, by its timeline and full.
	Timeline string `json:"timeline"`
	Snapshot string `json:"snapshot"`
	// Revision is the revision restored, before any bump; TimelineEnd the
	// newest revision the timeline held then.
	Revision     int64     `json:"revision"`
	TimelineEnd  int64     `json:"timeline_end"`
	RevisionBump uint64    `json:"revision_bump,omitempty"`
	Created      time.Time `json:"created"`
}

// Fork says whether the restored cluster lives a new past: it was not
// restored to the end of its timeline.
func (r Restored) Fork() bool { return r.Revision < r.TimelineEnd }

// RecordRestore writes r down, create-only, under a name of its own.
func RecordRestore(ctx context.Context, st store.Store, r Restored) error {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	key := fmt.Sprintf("%s/%d-%s-%s.json", restoreDir, r.Created.Unix(), r.ClusterID, hex.EncodeToString(b[:]))
	return putJSON(ctx, st, key, r)
}

// RestoreRecords are the keys of the restore records of cluster id (hex), the
// oldest first.
func RestoreRecords(ctx context.Context, st store.Store, clusterID string) ([]string, error) {
	objs, err := st.List(ctx, restoreDir+"/")
	if err != nil {
		return nil, fmt.Errorf("list restore records: %w", err)
	}
	type rec struct {
		key string
		sec int64
	}
	var recs []rec
	for _, o := range objs {
		unix, rest, ok := strings.Cut(path.Base(o.Key), "-")
		sec, err := strconv.ParseInt(unix, 10, 64)
		if ok && err == nil && strings.HasPrefix(rest, clusterID+"-") {
			recs = append(recs, rec{o.Key, sec})
		}
	}
	slices.SortStableFunc(recs, func(a, b rec) int { return cmp.Compare(a.sec, b.sec) })
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.key
	}
	return keys, nil
}

// LastRestore is the newest restore recorded of cluster id (hex). The
// names order records by the second only; of restores in the same second,
// the newest by its record's time is the last.
func LastRestore(ctx context.Context, st store.Store, clusterID string) (Restored, bool, error) {
	keys, err := RestoreRecords(ctx, st, clusterID)
	if err != nil || len(keys) == 0 {
		return Restored{}, false, err
	}
	second := func(k string) string { unix, _, _ := strings.Cut(path.Base(k), "-"); return unix }
	var last Restored
	found := false
	for i := len(keys) - 1; i >= 0 && second(keys[i]) == second(keys[len(keys)-1]); i-- {
		r, ok, err := getJSON[Restored](ctx, st, keys[i])
		if err != nil {
			return Restored{}, false, err
		}
		if ok && (!found || r.Created.After(last.Created)) {
			last, found = r, true
		}
	}
	return last, found, nil
}

// Continues says whether an older version's record of a restore links
// cluster to cluster of, whose chain it is: cluster-<id>.json names the
// cluster each was restored from.
func Continues(ctx context.Context, st store.Store, cluster, of string) (bool, error) {
	for range 8 {
		rec, ok, err := getJSON[Identity](ctx, st, identityDir+"/cluster-"+cluster+".json")
		if err != nil || !ok || rec.Continues == "" {
			return false, err
		}
		if rec.Continues == of {
			return true, nil
		}
		cluster = rec.Continues
	}
	return false, nil
}
