package restore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdkit/etcdkit/internal/database"
	"github.com/etcdkit/etcdkit/internal/datadir"
	"github.com/etcdkit/etcdkit/internal/etcdstorage"
)

// Rebuild makes a data dir anew from its own database, for the member
// opts describes, and moves the old one aside: the keyspace and its
// revision stay, the WAL and the membership are written afresh. It is for
// a data dir whose database is sound but whose WAL this etcd cannot
// replay, such as one etcd 3.5 wrote (etcd-backup-restore's restores),
// written for opts.Release.
// opts.Read is unused; the rebuilt member is a new cluster of one, as a
// restore's is.
func Rebuild(ctx context.Context, opts Options) (Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	unlock, err := datadir.LockBuild(opts.Member.DataDir)
	if err != nil {
		return Result{}, fmt.Errorf("rebuild: %w", err)
	}
	defer unlock()
	// Read before the hold, which locks the database against any open.
	db := filepath.Join(opts.Member.DataDir, "member", "snap", "db")
	rev, err := database.Revision(db)
	if err != nil {
		return Result{}, fmt.Errorf("rebuild %s: %w", opts.Member.DataDir, err)
	}
	release, err := datadir.Hold(opts.Member.DataDir, opts.Member.WALDir)
	if err != nil {
		return Result{}, fmt.Errorf("rebuild: %w", err)
	}
	defer release()
	work, err := os.MkdirTemp(filepath.Dir(opts.Member.DataDir), filepath.Base(opts.Member.DataDir)+".tmp-")
	if err != nil {
		return Result{}, fmt.Errorf("rebuild: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	out := filepath.Join(work, "data")
	// What the member's release refuses goes with the rest (Member.Release).
	if err := etcdstorage.Rebuild(db, out, opts.member(opts.RevisionBump)); err != nil {
		return Result{}, fmt.Errorf("rebuild %s from its database for etcd %s: %w", opts.Member.DataDir, opts.Release, err)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("rebuild: %w", err)
	}
	res := Result{Revision: rev}
	if err := datadir.MarkBuilt(out, "rebuild", opts.Now()); err != nil {
		return res, fmt.Errorf("rebuild: %w", err)
	}
	if res.MovedAside, res.WALMovedAside, err = swapIn(out, opts.Member.DataDir, opts.Member.WALDir, opts.Now()); err != nil {
		return res, err
	}
	release()
	prune(opts, "rebuild", res.MovedAside, res.WALMovedAside)
	res.Total = time.Since(start)
	opts.Read.Logger.Info("rebuilt from its database", "data-dir", opts.Member.DataDir, "revision", rev, "moved-aside", res.MovedAside,
		"took", res.Total.Round(time.Millisecond))
	return res, nil
}
