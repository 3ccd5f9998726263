package etcdstorage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcdkit/etcdkit/internal/database"
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
	if err := copyFile(db, dst); err != nil {
		return err
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

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}
