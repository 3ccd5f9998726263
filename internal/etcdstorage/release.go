package etcdstorage

import (
	"errors"
	"fmt"
	"os"

	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/schema"

	"github.com/etcdkit/etcdkit/etcdversion"
)

// v36 is the first release that keeps a storage version.
var v36 = etcdversion.MustParse("3.6")

// fitRelease makes the database of a new cluster one that etcd of
// release e starts on, changing only what e refuses, so a backup restored
// for its own release stays etcdutl's restore byte for byte:
//   - etcd 3.5 keeps no storage version: one the backup's cluster wrote
//     goes, or the first step to 3.6 would refuse it; a storage version
//     newer than e's is e's (the storage of 3.6 and 3.7 is the same but for
//     the version, so this is etcd's own migration down);
//   - a cluster version that e stops on (newer than e) or may not step
//     from (more than a minor behind) goes: the new cluster's members
//     agree on theirs when they start, as in any new cluster;
//   - a downgrade the backup's cluster had enabled goes with that
//     cluster.
func fitRelease(tx backend.UnsafeReadWriter, e etcdversion.Version) error {
	e = e.Trim()
	_, sv := tx.UnsafeRange(schema.Meta, schema.MetaStorageVersionName, nil, 0)
	if len(sv) == 1 && len(sv[0]) > 0 {
		s, err := etcdversion.Parse(string(sv[0]))
		if err != nil {
			return fmt.Errorf("the database's storage version: %w", err)
		}
		switch {
		case e.Less(v36):
			tx.UnsafeDelete(schema.Meta, schema.MetaStorageVersionName)
		case e.Less(s.Trim()):
			tx.UnsafePut(schema.Meta, schema.MetaStorageVersionName, []byte(e.String()))
		}
	}
	_, cv := tx.UnsafeRange(schema.Cluster, schema.ClusterClusterVersionKeyName, nil, 0)
	if len(cv) == 1 && len(cv[0]) > 0 {
		c, err := etcdversion.Parse(string(cv[0]))
		if err != nil {
			return fmt.Errorf("the database's cluster version: %w", err)
		}
		if e.Less(c.Trim()) || c.Trim().Steps(e) > 1 {
			tx.UnsafeDelete(schema.Cluster, schema.ClusterClusterVersionKeyName)
		}
	}
	if _, d := tx.UnsafeRange(schema.Cluster, schema.ClusterDowngradeKeyName, nil, 0); len(d) == 1 {
		tx.UnsafeDelete(schema.Cluster, schema.ClusterDowngradeKeyName)
	}
	return nil
}

// SyncFile makes a file written without fsync durable.
func SyncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
