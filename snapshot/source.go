package snapshot

import (
	"fmt"

	"github.com/etcdkit/etcdkit/internal/database"
)

// SourceKind names what a backup is taken of.
type SourceKind string

const (
	// SourceEtcd is an etcd cluster: fulls are the databases its
	// Maintenance.Snapshot streams.
	SourceEtcd SourceKind = "etcd"
	// SourceEtcdAPI is any datastore that serves etcd's KV and Watch API
	// without its snapshot RPC (kine over SQLite, Postgres, MySQL or NATS):
	// fulls are logical, built here from a Range at one revision.
	SourceEtcdAPI SourceKind = "etcd-api"
)

// ParseSourceKind reads a --source flag; "" is SourceEtcd.
func ParseSourceKind(s string) (SourceKind, error) {
	switch SourceKind(s) {
	case "", SourceEtcd:
		return SourceEtcd, nil
	case SourceEtcdAPI:
		return SourceEtcdAPI, nil
	}
	return "", fmt.Errorf("source %q: give %q (an etcd cluster) or %q (a datastore that serves etcd's API, such as kine)", s, SourceEtcd, SourceEtcdAPI)
}

// Logical describes a full built from a Range at one revision (a source
// that serves etcd's API without its snapshot RPC): what it holds and what
// it cannot.
type Logical struct {
	// Keys is how many keys it holds; Leases how many leases they name.
	Keys   int64 `json:"keys"`
	Leases int64 `json:"leases,omitempty"`
	// LeaseTTLs says where its leases' TTLs came from: "granted" (the
	// datastore answered LeaseTimeToLive), "lease-id" (kine numbers each
	// lease by its TTL and answers no TTL), "" when it names none.
	LeaseTTLs string `json:"lease_ttls,omitempty"`
	// NoVersions: the datastore keeps no key versions (kine): each key is
	// recorded at version 1.
	NoVersions bool `json:"no_versions,omitempty"`
	// Limits are what it cannot hold, in words, as list shows them.
	Limits []string `json:"limits"`
}

// LogicalMarker is a meta-bucket key of a logical full's database: etcd
// and etcd-backup-restore read the meta bucket by the keys they know, and
// a replay of its chain reads this one to know that the datastore's
// revisions may skip numbers (a SQL sequence's, rows the datastore hides
// from its watchers), which in etcd's own chains are lost events.
const LogicalMarker = "etcdkit_logical_full"

// IsLogical says whether the database at path is a logical full, or
// was built from one: its chain's revisions may skip numbers.
func IsLogical(path string) (bool, error) {
	db, err := database.Open(path)
	if err != nil {
		return false, err
	}
	defer func() { _ = db.Close() }()
	meta, err := db.Bucket([]byte("meta"))
	if err != nil || meta == nil {
		return false, err
	}
	v, err := meta.Get([]byte(LogicalMarker))
	return v != nil, err
}
