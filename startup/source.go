package startup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/validate"
)

// Preparer is where a start-up's data comes from: it judges the member's
// data dir beside what the backups hold, and rebuilds the data dir from
// them when the plan says so.
type Preparer interface {
	// Check validates the data dir (the sanity checks after a clean
	// shutdown, the full ones otherwise) and reads what the backups hold.
	Check(ctx context.Context, cfg Config) (Check, error)
	// Restore rebuilds the data dir from the backups Check found, for the
	// plan's initial cluster. A failed restore leaves the data dir as it
	// was.
	Restore(ctx context.Context, cfg Config, p Plan) (RestoreResult, error)
}

// Check is what a Preparer found.
type Check struct {
	Verdict validate.Verdict
	// Reason says which check decided the verdict and why.
	Reason string
	// Revision is the data dir's.
	Revision int64
	// Release is what the data dir says of the etcd releases that ran it,
	// where this process read it (a Remote source tells the verdict only).
	Release validate.Release
	// Store: the source has a store to restore from; Backups: it holds a
	// chain, reaching BackupRevision.
	Store          bool
	Backups        bool
	BackupRevision int64
	// MemberID and ClusterID are whose data the data dir holds, by its
	// WAL; 0 when it was not read.
	MemberID, ClusterID uint64
}

// RestoreResult reports a restore.
type RestoreResult struct {
	// Revision the data dir holds; Revisions replayed from deltas.
	Revision, Revisions int64
	// RevisionBump is how far the revision was raised past Revision.
	RevisionBump uint64
	// MovedAside is where the previous data dir went, "" if none.
	MovedAside string
}

// Local validates, reads the store and restores in this process. The
// catalog is listed once, by Check; the chain it picked is the one
// Restore rebuilds. A Local serves one start-up at a time.
type Local struct {
	// Store holds the backups; nil: none.
	Store store.Store
	// Secondary is a second site with copies of Store's snapshots, read
	// when Store cannot be listed or its newest chain is broken, and
	// restored from when a backup read is damaged
	// (restore.ReadOptions.Secondary). nil: none.
	Secondary store.Store
	// Codec reads encrypted backups.
	Codec snapshot.Codec
	// KeepMovedAside is how many moved-aside data dirs a restore keeps.
	// Default 1; negative keeps them all.
	KeepMovedAside int
	// KeepRevision has restores keep the backup's revision. By default a
	// start-up's restore bumps it past any the lost data may have served
	// and marks it compacted (restore.Options.SafeRevision).
	KeepRevision bool
	// Progress, when set, follows a restore.
	Progress func(restore.Progress)
	// Logger: nil discards.
	Logger *slog.Logger

	chain *snapshot.Chain
	site  store.Store // of Store and Secondary, the one Check read
}

// Check implements Preparer.
func (l *Local) Check(ctx context.Context, cfg Config) (Check, error) {
	chk := Check{Store: l.Store != nil}
	l.chain, l.site = nil, l.Store
	if l.Store != nil {
		l.site = restore.Site(ctx, l.Store, restore.ReadOptions{Secondary: l.Secondary, Logger: l.Logger})
		cat, err := snapshot.List(ctx, l.site)
		if err != nil {
			return chk, err
		}
		chain, err := cat.Latest()
		switch {
		case errors.Is(err, snapshot.ErrNoFull):
		case err != nil:
			return chk, err
		default:
			if chain, err = chain.Check(); err != nil {
				return chk, err
			}
			l.chain = &chain
			chk.Backups, chk.BackupRevision = true, chain.LastRevision()
		}
	}
	mode := validate.Full
	if cfg.CleanShutdown {
		mode = validate.Sanity
	}
	rep, err := validate.DataDir(ctx, cfg.Member.DataDir, validate.Options{Mode: mode, Name: cfg.Member.Name, Token: cfg.Member.Token, WALDir: cfg.Member.WALDir,
		BackupRevision: chk.BackupRevision, MultiMember: cfg.multiMember(), Etcd: cfg.etcd(), Logger: l.Logger})
	if err != nil {
		return chk, fmt.Errorf("validate %s: %w", cfg.Member.DataDir, err)
	}
	chk.Verdict, chk.Reason, chk.Revision, chk.Release = rep.Verdict, rep.Reason, rep.Revision, rep.Release
	chk.MemberID, chk.ClusterID = rep.MemberID, rep.ClusterID
	if rep.Verdict == validate.Behind && l.chain != nil {
		l.operatorsRollback(ctx, &chk)
	}
	return chk, nil
}

// operatorsRollback clears a Behind verdict when the data dir is a
// restore to an earlier revision that was recorded after the backups'
// newest chain began: an operator's point-in-time restore, which its
// sidecar continues as a new timeline. Restoring the newest state over it
// would undo it.
func (l *Local) operatorsRollback(ctx context.Context, chk *Check) {
	rr, ok, err := snapshot.LastRestore(ctx, l.site, strconv.FormatUint(chk.ClusterID, 16))
	if err != nil || !ok || !rr.Fork() || rr.Created.Before(l.chain.Full.Created) || chk.Revision < rr.Revision {
		return
	}
	chk.Verdict = validate.Valid
	chk.Reason = fmt.Sprintf("the data dir is a restore to revision %d of %s, recorded at %s: the backups' newer revisions (to %d) are the past it left, and its sidecar begins a new timeline",
		rr.Revision, rr.Snapshot, rr.Created.Format(time.RFC3339), chk.BackupRevision)
}

// Restore implements Preparer: it rebuilds the chain Check picked.
func (l *Local) Restore(ctx context.Context, cfg Config, p Plan) (RestoreResult, error) {
	if l.Store == nil {
		return RestoreResult{}, errors.New("there is no store to restore from")
	}
	// The backups must be this member's cluster's: a lone member must not
	// come back with another cluster's keyspace.
	id, err := restore.MemberID(cfg.Member.Name, cfg.Member.PeerURLs, cmp.Or(cfg.Member.Token, member.DefaultToken))
	if err != nil {
		return RestoreResult{}, err
	}
	// The chain Check picked is read from the site it listed; the other
	// site is where a damaged backup is restored from instead.
	site, other := cmp.Or[store.Store](l.site, l.Store), l.Secondary
	if site != l.Store {
		other = l.Store
	}
	res, err := restore.Restore(ctx, site, restore.Options{Read: restore.ReadOptions{Chain: l.chain, Secondary: other, Codec: l.Codec, Progress: l.Progress, Logger: l.Logger,
		Member: id, MemberName: cfg.Member.Name}, Member: member.Spec{DataDir: cfg.Member.DataDir, WALDir: cfg.Member.WALDir, Name: cfg.Member.Name, PeerURLs: cfg.Member.PeerURLs, InitialCluster: p.InitialCluster, Token: cfg.Member.Token}, KeepMovedAside: l.KeepMovedAside, SafeRevision: !l.KeepRevision, KeepRevision: l.KeepRevision, Release: cfg.etcd()})
	if err != nil {
		return RestoreResult{}, err
	}
	return RestoreResult{Revision: res.Revision, Revisions: res.Revisions, RevisionBump: res.RevisionBump, MovedAside: res.MovedAside}, nil
}

// Remote has a sidecar's API validate and restore: the sidecar holds the
// store and the rights to it, this process decides.
type Remote struct {
	Client *api.Client
	// Wait bounds how long a sidecar that does not answer yet (it starts
	// beside the member) is waited for. Default 5 min.
	Wait time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
}

// Check implements Preparer through POST /v1/validate.
func (r Remote) Check(ctx context.Context, cfg Config) (Check, error) {
	req := api.ValidateRequest{Member: api.Member{DataDir: cfg.Member.DataDir, WALDir: cfg.Member.WALDir, Name: cfg.Member.Name, InitialClusterToken: cfg.Member.Token, InitialCluster: cfg.Member.InitialCluster}, Sanity: cfg.CleanShutdown, EtcdVersion: cfg.etcd().String()}
	var v api.Validation
	err := r.retry(ctx, func() error {
		var err error
		v, err = r.Client.Validate(ctx, req)
		return err
	})
	if err != nil {
		return Check{}, err
	}
	return Check{Verdict: validate.Verdict(v.Verdict), Reason: v.Reason, Revision: v.Revision,
		Store: true, Backups: v.Backups, BackupRevision: v.BackupRevision}, nil
}

// Restore implements Preparer through POST /v1/restore.
func (r Remote) Restore(ctx context.Context, cfg Config, p Plan) (RestoreResult, error) {
	req := api.RestoreRequest{Member: api.Member{DataDir: cfg.Member.DataDir, WALDir: cfg.Member.WALDir, Name: cfg.Member.Name, PeerURLs: cfg.Member.PeerURLs, InitialCluster: p.InitialCluster, InitialClusterToken: cfg.Member.Token}, EtcdVersion: cfg.etcd().String()}
	var job api.Job
	err := r.retry(ctx, func() error {
		var err error
		job, err = r.Client.Restore(ctx, req, 0)
		return err
	})
	if err != nil {
		return RestoreResult{}, err
	}
	if job.State != api.JobSucceeded {
		return RestoreResult{}, fmt.Errorf("the sidecar's restore job %s failed: %s", job.ID, job.Error)
	}
	return RestoreResult{Revision: job.Revision, Revisions: job.Revisions, RevisionBump: job.RevisionBump}, nil
}

// retry calls f until the sidecar answers, backing off from 1 s to 15 s,
// for at most r.Wait. A TLS file that does not load, or a certificate
// the sidecar refuses, is not waited out.
func (r Remote) retry(ctx context.Context, f func() error) error {
	wait, limit := time.Second, r.Wait
	if limit <= 0 {
		limit = 5 * time.Minute
	}
	log := logger(r.Logger)
	deadline := time.Now().Add(limit)
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if tlsErr := (*tlsfiles.Error)(nil); errors.As(err, &tlsErr) || errors.Is(err, api.ErrRefused) {
			return err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the sidecar did not answer within %s: %w", limit, err)
		}
		log.Warn("startup: waiting for the sidecar", "attempt", attempt, "retry_in", wait, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 15*time.Second)
	}
}

// rebuild makes the data dir anew from its own database
// (restore.Rebuild) for the release the member runs: the keyspace and its
// revision stay, the WAL and the membership are written afresh. It is
// for a data dir a restore just made for another release (an
// etcd-backup-restore sidecar restores with etcd 3.5), never for one a
// member ran: that one's release is a fact, not damage.
func rebuild(ctx context.Context, cfg Config, initialCluster string, chk Check, log *slog.Logger) error {
	log.Info("startup: rebuilding the restored data dir from its database for this member's etcd", "etcd", cfg.etcd(), "reason", chk.Reason)
	res, err := restore.Rebuild(ctx, restore.Options{Read: restore.ReadOptions{Logger: log}, Member: member.Spec{DataDir: cfg.Member.DataDir, WALDir: cfg.Member.WALDir, Name: cfg.Member.Name, PeerURLs: cfg.Member.PeerURLs, InitialCluster: initialCluster, Token: cfg.Member.Token}, Release: cfg.etcd()})
	if err != nil {
		return fmt.Errorf("rebuild %s: %w", cfg.Member.DataDir, err)
	}
	log.Info("startup: rebuilt", "revision", res.Revision, "moved_aside", res.MovedAside)
	return nil
}

// logger is l, or one that discards when l is nil.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
