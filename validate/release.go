package validate

import (
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/etcdkit/etcdkit/etcdversion"
)

// Release is what a data dir says of the etcd releases that ran it. Each
// fact is zero where the data dir says nothing of it.
type Release struct {
	// Storage is the database's storage version (meta's storageVersion):
	// etcd 3.6 and later write theirs once the cluster runs at their
	// version; etcd 3.5 writes none, and a 3.6 that steps down to 3.5
	// removes it.
	Storage etcdversion.Version
	// Cluster is the cluster version the members agreed on (the cluster
	// bucket's clusterVersion); zero before they wrote one, 3.0 (etcd's
	// floor) until every member of a new cluster told its release.
	Cluster etcdversion.Version
	// Downgrade is the target of a downgrade the cluster enabled (etcd's
	// downgrade API), zero when none is.
	Downgrade etcdversion.Version
	// V2Entries counts the WAL entries etcd replays at start that an etcd
	// 3.5 member wrote in their v2 form: etcd 3.6 applies them, 3.7 and
	// later panic on them. FirstV2 is the first one's index.
	V2Entries int64
	FirstV2   uint64
	// V2Custom counts the v2 entries that write the v2 store rather than
	// the membership: etcd 3.6 panics on those too.
	V2Custom int64
}

// Written is the release the data dir was last run at, as a minor: the
// cluster version its members agreed on, else its storage's (etcd 3.5's
// when it names none). A restore keeps the storage version of the backup
// it restored, which may be another cluster's release.
func (r Release) Written() etcdversion.Version {
	if etcdversion.Decided(r.Cluster) {
		return r.Cluster.Trim()
	}
	return r.storage()
}

// storage is the storage version etcd detects: etcd 3.5's when the
// database names none.
func (r Release) storage() etcdversion.Version {
	if r.Storage.IsZero() {
		return etcdversion.Supported[0]
	}
	return r.Storage.Trim()
}

// Refuses says why etcd of release e cannot start on the data dir, ""
// when it can. The rules are etcd's own at start, and the one etcd
// states for every change of release: one minor at a time.
//   - The storage: etcd 3.6 and later migrate a storage version up and
//     refuse one newer than theirs (3.5 reads none). A member writes its
//     storage version only once its cluster runs at its release, so the
//     steps are counted by the cluster version.
//   - The cluster version: etcd stops on a cluster version newer than its
//     own (its downgrade API lowers it first), and steps up one minor at a
//     time.
//   - The WAL: etcd 3.7 and later cannot apply the v2 entries etcd 3.5
//     wrote, and etcd 3.6 only those that set the membership.
func (r Release) Refuses(e etcdversion.Version) string {
	why := r.refusals(e)
	if len(why) == 0 {
		return ""
	}
	msg := fmt.Sprintf("etcd %s's data: %s", r.Written().MinorString(), strings.Join(why, "; "))
	if fit := r.Starts(); len(fit) > 0 {
		msg += fmt.Sprintf(": run etcd %s on it (a release is a fact of the data, not damage: nothing is moved aside)", etcdversion.Either(fit))
	} else {
		msg += ": no release etcdkit runs starts on it; restore it from its backups (etcd-backup restore --etcd-version) or rebuild it from its database"
	}
	return msg
}

// refusals are Refuses' reasons, one per rule broken.
func (r Release) refusals(e etcdversion.Version) []string {
	e = e.Trim()
	var why []string
	v36 := etcdversion.MustParse("3.6")
	switch s := r.storage(); {
	case e.Less(v36) && !r.Downgrade.IsZero() && !s.Less(v36):
		// etcd 3.5 reads no storage version; but a member stepping down
		// through etcd's downgrade API migrates its storage first, and
		// does so only once its WAL holds nothing 3.5 cannot apply.
		why = append(why, fmt.Sprintf("the downgrade to %s is enabled, but this member has not migrated its storage yet (storage version %s): wait until it has (etcdctl endpoint status shows the storage version)", r.Downgrade.MinorString(), s.MinorString()))
	case e.Less(v36):
	case e.Less(s):
		why = append(why, fmt.Sprintf("its storage version is %s, newer than etcd %s's (etcd steps its storage down only through its downgrade API)", s.MinorString(), e.MinorString()))
	}
	if c := r.Cluster.Trim(); etcdversion.Decided(r.Cluster) {
		switch {
		case e.Less(c):
			why = append(why, fmt.Sprintf("its cluster version is %s, newer than etcd %s (etcd stops on it)", c.MinorString(), e.MinorString()))
		case c.Steps(e) > 1:
			why = append(why, fmt.Sprintf("its cluster version is %s, and etcd steps up one minor at a time", c.MinorString()))
		}
	}
	if r.V2Custom > 0 && !e.Less(v36) {
		why = append(why, fmt.Sprintf("its WAL holds %s that write etcd 3.5's v2 store (not its membership), which etcd %s cannot apply", entries(r.V2Custom), e.MinorString()))
	} else if r.V2Entries > 0 && !e.Less(v36.Next()) {
		why = append(why, fmt.Sprintf("its WAL holds %s from index %d on in etcd 3.5's v2 form, which etcd %s cannot apply", entries(r.V2Entries), r.FirstV2, e.MinorString()))
	}
	return why
}

// Starts lists the supported releases that start on the data dir.
func (r Release) Starts() []etcdversion.Version {
	var out []etcdversion.Version
	for _, v := range etcdversion.Supported {
		if len(r.refusals(v)) == 0 {
			out = append(out, v)
		}
	}
	return out
}

// String names the facts: "storage 3.6, cluster 3.6.0".
func (r Release) String() string {
	var parts []string
	if r.Storage.IsZero() {
		parts = append(parts, "no storage version (etcd 3.5's)")
	} else {
		parts = append(parts, "storage version "+r.Storage.MinorString())
	}
	if !r.Cluster.IsZero() {
		parts = append(parts, "cluster version "+r.Cluster.String())
	}
	if !r.Downgrade.IsZero() {
		parts = append(parts, "downgrading to "+r.Downgrade.MinorString())
	}
	if r.V2Entries > 0 {
		parts = append(parts, fmt.Sprintf("%s in 3.5's v2 form in the WAL", entries(r.V2Entries)))
	}
	return strings.Join(parts, ", ")
}

// The keys etcd keeps its releases under (etcd's schema package).
var (
	bucketCluster        = []byte("cluster")
	bucketMembersRemoved = []byte("members_removed")
	keyStorageVersion    = []byte("storageVersion")
	keyClusterVersion    = []byte("clusterVersion")
	keyDowngrade         = []byte("downgrade")
)

// ReadRelease reads an etcd database's facts of its releases, in a
// transaction of the caller's; a bucket the database lacks says nothing.
func ReadRelease(tx *bolt.Tx) (Release, error) {
	var r Release
	meta := tx.Bucket([]byte("meta"))
	if meta == nil {
		return r, nil
	}
	if v := meta.Get(keyStorageVersion); len(v) > 0 {
		s, err := etcdversion.Parse(string(v))
		if err != nil {
			return r, fmt.Errorf("meta's storageVersion: %w", err)
		}
		r.Storage = s
	}
	cluster := tx.Bucket(bucketCluster)
	if cluster == nil {
		return r, nil
	}
	if v := cluster.Get(keyClusterVersion); len(v) > 0 {
		c, err := etcdversion.Parse(string(v))
		if err != nil {
			return r, fmt.Errorf("cluster's clusterVersion: %w", err)
		}
		r.Cluster = c
	}
	if v := cluster.Get(keyDowngrade); len(v) > 0 {
		var d struct {
			Target  string `json:"target-version"`
			Enabled bool   `json:"enabled"`
		}
		if err := json.Unmarshal(v, &d); err != nil {
			return r, fmt.Errorf("cluster's downgrade: %w", err)
		}
		if d.Enabled && d.Target != "" {
			t, err := etcdversion.Parse(d.Target)
			if err != nil {
				return r, fmt.Errorf("cluster's downgrade: %w", err)
			}
			r.Downgrade = t
		}
	}
	return r, nil
}

// removedMembers reads the members_removed bucket: the IDs of the
// members the cluster removed, as this member applied the removals.
func removedMembers(tx *bolt.Tx) (map[string]bool, error) {
	b := tx.Bucket(bucketMembersRemoved)
	if b == nil {
		return nil, fmt.Errorf("bucket %q is missing", bucketMembersRemoved)
	}
	out := map[string]bool{}
	err := b.ForEach(func(k, _ []byte) error {
		out[string(k)] = true
		return nil
	})
	return out, err
}

// entries is "1 entry" or "n entries".
func entries(n int64) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}
