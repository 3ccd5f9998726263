package startup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/internal/datadir"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/store"
)

// RecoverOptions configures RecoverQuorum.
type RecoverOptions struct {
	// Members are the cluster's members. The first is restored from the
	// backup and started alone; the others join it one at a time. Each
	// needs Name, DataDir, PeerURLs and ClientURLs.
	Members []Config
	// Token is the new cluster's --initial-cluster-token. Default
	// member.DefaultToken.
	Token string
	// Read picks the chain and how it is read (the latest by default).
	Read restore.ReadOptions
	// RevisionBump raises the restored revision by this much. 0: by
	// restore.SafeBump's estimate, so that clients that saw revisions past
	// the backup never see one go back, unless KeepRevision.
	RevisionBump uint64
	// KeepRevision, with RevisionBump 0, keeps the backup's revision.
	KeepRevision bool
	// Conn is how the members are reached (TLS, authentication); its
	// endpoints are ignored: the first member's client URLs are. With
	// authentication on, its user needs the root role.
	Conn etcdclient.Config
	// Start starts a member's etcd with the plan's initial cluster and
	// state and returns once it serves (a learner: once it started). It
	// is the caller's way of running etcd: in process, or a process.
	Start func(ctx context.Context, m Config, p Plan) error
	// Retry bounds the add and promote of each member.
	Retry member.RetryOptions
	// Now names moved-aside data dirs. Default time.Now.
	Now func() time.Time
	// KeepMovedAside is how many moved-aside data dirs are kept beside
	// each member's, the one this recovery makes included. Default 1;
	// negative keeps them all.
	KeepMovedAside int
	// Logger: nil discards.
	Logger *slog.Logger
}

// RecoverQuorum rebuilds a cluster that lost quorum from the backups on
// st: the first member's data dir is restored and started as a new
// single-member cluster, then each other member's data dir is moved
// aside, the member is added as a learner, started, and promoted once it
// has caught up, one at a time, so the cluster has quorum at every step.
// It is for when the members' data is lost or can no longer form a quorum;
// every data dir it replaces is moved aside, never deleted.
func RecoverQuorum(ctx context.Context, st store.Store, o RecoverOptions) (restore.Result, error) {
	if len(o.Members) == 0 || o.Start == nil {
		return restore.Result{}, errors.New("startup: recover quorum: members and a Start function are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Retry.Logger = o.Logger
	first := o.Members[0]
	initial := initialCluster(nil, first)
	res, err := restore.Restore(ctx, st, restore.Options{Read: o.Read, Member: member.Spec{DataDir: first.Member.DataDir, WALDir: first.Member.WALDir, Name: first.Member.Name, PeerURLs: first.Member.PeerURLs, InitialCluster: initial, Token: o.Token}, RevisionBump: o.RevisionBump, SafeRevision: !o.KeepRevision, KeepRevision: o.KeepRevision, Now: o.Now, KeepMovedAside: o.KeepMovedAside, Release: first.etcd()})
	if err != nil {
		return res, fmt.Errorf("startup: recover quorum: restore %s: %w", first.Member.Name, err)
	}
	o.Logger.Info("startup: restored", "member", first.Member.Name, "revision", res.Revision, "bump", res.RevisionBump, "moved_aside", res.MovedAside)
	if err := o.Start(ctx, first, Plan{Action: Restore, Reason: "recovering quorum", InitialCluster: initial, ClusterState: "new"}); err != nil {
		return res, fmt.Errorf("startup: recover quorum: start %s: %w", first.Member.Name, err)
	}
	cli, err := membershipClient(ctx, o.Conn, 0, first.ClientURLs)
	if err != nil {
		return res, fmt.Errorf("startup: recover quorum: %s: %w", first.Member.Name, err)
	}
	defer func() { _ = cli.Close() }()
	for _, m := range o.Members[1:] {
		if err := moveAside(m, Options{Now: o.Now, Logger: o.Logger, KeepMovedAside: o.KeepMovedAside}); err != nil {
			return res, fmt.Errorf("startup: recover quorum: %s: %w", m.Member.Name, err)
		}
		if err := datadir.MarkBuilt(m.Member.DataDir, "join", o.Now()); err != nil {
			return res, fmt.Errorf("startup: recover quorum: %s: %w", m.Member.Name, err)
		}
		added, members, err := member.AddLearner(ctx, cli, m.Member.PeerURLs, o.Retry)
		if err != nil {
			return res, fmt.Errorf("startup: recover quorum: %s: %w", m.Member.Name, err)
		}
		p := Plan{Action: JoinAsLearner, Reason: "recovering quorum", InitialCluster: initialCluster(members, m),
			ClusterState: "existing", ID: added.ID, Learner: true}
		if err := o.Start(ctx, m, p); err != nil {
			return res, fmt.Errorf("startup: recover quorum: start %s: %w", m.Member.Name, err)
		}
		if err := member.PromoteWhenReady(ctx, cli, added.ID, o.Retry); err != nil {
			return res, fmt.Errorf("startup: recover quorum: %s: %w", m.Member.Name, err)
		}
		o.Logger.Info("startup: rejoined", "member", m.Member.Name)
	}
	return res, nil
}

// moveAside moves a member's data dir, and its wal-dir when it has one,
// aside, and prunes what older moves left past o.KeepMovedAside.
func moveAside(cfg Config, o Options) error {
	for _, dir := range []string{cfg.Member.DataDir, cfg.Member.WALDir} {
		if dir == "" {
			continue
		}
		aside, err := datadir.MoveAside(dir, o.Now())
		if err != nil {
			return err
		}
		o.Logger.Info("startup: moved aside", "member", cfg.Member.Name, "dir", dir, "to", aside)
		built := datadir.Built
		if dir == cfg.Member.WALDir {
			built = datadir.Companion(cfg.Member.WALDir, cfg.Member.DataDir)
		}
		removed, err := datadir.Prune(dir, o.KeepMovedAside, aside, built)
		if err != nil {
			o.Logger.Warn("startup: prune moved-aside dirs", "dir", dir, "error", err)
		} else if len(removed) > 0 {
			o.Logger.Info("startup: pruned moved-aside dirs", "removed", removed)
		}
	}
	return nil
}
