package startup

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdkit/etcdkit/sidecar/etcdbr/etcdbrapi"
	"github.com/etcdkit/etcdkit/validate"
)

// EtcdBR prepares the data dir beside a sidecar that speaks
// etcd-backup-restore's protocol (etcd-backup-restore itself, or
// etcd-backup server): this process validates the data dir and decides
// membership, and the sidecar, which alone reads the store, restores.
//
// A lone member cannot know here whether its data dir is behind the
// backups, so its sidecar initializes it at every start (validating it
// against the store, restoring when it must). In a cluster of several the
// peers hold the data: the sidecar is asked only when no member runs, by
// the first member of the initial cluster, and the others join it; with
// no look at the store, backups are taken to exist, so even a new cluster
// starts its first member alone and adds the others.
type EtcdBR struct {
	Client *etcdbrapi.Client
	// Wait bounds one initialization by the sidecar. Default 10 min.
	Wait time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
}

// Check implements Preparer.
func (e EtcdBR) Check(ctx context.Context, cfg Config) (Check, error) {
	local := &Local{Logger: e.Logger}
	if !cfg.multiMember() {
		before := database(cfg.Member.DataDir)
		if err := e.initialize(ctx, cfg); err != nil {
			return Check{}, err
		}
		// What the sidecar left is what starts; a data dir it could not
		// make sound is refused, with no store here to restore from. One
		// it restored is rebuilt for this member's release when that
		// release cannot start on it.
		if after := database(cfg.Member.DataDir); after != nil && (before == nil || !os.SameFile(before, after)) {
			return e.checkRebuilt(ctx, cfg, cfg.Member.InitialCluster)
		}
		return local.Check(ctx, cfg)
	}
	chk, err := local.Check(ctx, cfg)
	chk.Store, chk.Backups = true, true
	return chk, err
}

// Restore implements Preparer: the sidecar's initialization.
func (e EtcdBR) Restore(ctx context.Context, cfg Config, p Plan) (RestoreResult, error) {
	if err := e.initialize(ctx, cfg); err != nil {
		return RestoreResult{}, err
	}
	chk, err := e.checkRebuilt(ctx, cfg, p.InitialCluster)
	if err != nil {
		return RestoreResult{}, err
	}
	return RestoreResult{Revision: chk.Revision}, nil
}

// checkRebuilt validates the data dir the sidecar restored, and
// rebuilds it when the member's release cannot start on it
// (etcd-backup-restore restores with etcd 3.5, etcd-backup server with
// 3.7).
func (e EtcdBR) checkRebuilt(ctx context.Context, cfg Config, initialCluster string) (Check, error) {
	local := &Local{Logger: e.Logger}
	chk, err := local.Check(ctx, cfg)
	if err != nil || chk.Verdict != validate.OtherVersion {
		return chk, err
	}
	if err := rebuild(ctx, cfg, initialCluster, chk, logger(e.Logger)); err != nil {
		return chk, err
	}
	return local.Check(ctx, cfg)
}

// database is the file of the data dir's database, nil when it has none.
func database(dataDir string) os.FileInfo {
	info, err := os.Stat(filepath.Join(dataDir, "member", "snap", "db"))
	if err != nil {
		return nil
	}
	return info
}

func (e EtcdBR) initialize(ctx context.Context, cfg Config) error {
	wait := e.Wait
	if wait <= 0 {
		wait = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	mode := etcdbrapi.Full
	if cfg.CleanShutdown {
		mode = etcdbrapi.Sanity
	}
	if err := e.Client.Initialize(ctx, mode); err != nil {
		return fmt.Errorf("the sidecar's initialization of %s: %w", cfg.Member.DataDir, err)
	}
	return nil
}
