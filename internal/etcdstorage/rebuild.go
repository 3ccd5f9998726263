package etcdstorage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdkit/etcdkit/internal/database"
	"github.com/etcdkit/etcdkit/internal/datadir"
)

// Rebuild writes the data dir out of member m anew from the database at
// db, as etcdutl's snapshot restore does: the database is copied, then
// made a member's data dir where it lies (MakeDataDir), synced. The
// keyspace and its revision stay (raised by m.Bump and marked compacted
// when it is set); the WAL and the membership are written afresh. db is
// read, never written.
func Rebuild(db, out string, m Member) error {
	dst := filepath.Join(out, "member", "snap", "db")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := datadir.CopyFile(db, dst); err != nil {
		return fmt.Errorf("copy %s: %w", db, err)
	}
	rev, err := database.Revision(dst)
	if err != nil {
		return err
	}
	b := Open(dst)
	err = b.MakeDataDir(out, rev, m)
	if err = errors.Join(err, b.Close()); err != nil {
		return err
	}
	return SyncFile(dst)
}
