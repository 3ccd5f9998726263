package restore

import (
	"errors"
	"path/filepath"

	"github.com/etcdkit/etcdkit/internal/etcdstorage"
)

// dbPath is where a data dir keeps its database.
func dbPath(dataDir string) string { return filepath.Join(dataDir, "member", "snap", "db") }

// finishInPlace makes the database a replay left (r; nil: a full alone,
// not opened yet) at dbPath(dataDir) a member's data dir
// (etcdstorage.Backend.MakeDataDir), closes it and syncs it.
func finishInPlace(r *replayer, dataDir string, rev int64, m etcdstorage.Member) error {
	db := dbPath(dataDir)
	var b *etcdstorage.Backend
	var closeAll func() error
	if r != nil {
		r.release()
		b, closeAll = r.b, r.close
	} else {
		b = etcdstorage.Open(db)
		closeAll = b.Close
	}
	err := b.MakeDataDir(dataDir, rev, m)
	if err = errors.Join(err, closeAll()); err != nil {
		return err
	}
	return etcdstorage.SyncFile(db)
}

// MemberID is the ID (hex) etcd gives a member of a new cluster named
// name, with peerURLs and the cluster's token: what a restore for it
// builds, and what the backups of its cluster name among their members.
func MemberID(name string, peerURLs []string, token string) (string, error) {
	return etcdstorage.MemberID(name, peerURLs, token)
}
