package startup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// Options configures Prepare and Decide. The zero value asks each
// endpoint over a plain connection with a 5 s timeout, refuses to wipe a
// corrupt data dir without backups, and waits up to 5 min for the first
// member to restore a cluster this one joins.
type Options struct {
	// Conn is how the endpoints are reached (TLS, authentication); its
	// endpoints are ignored: Config.Endpoints are asked one at a time.
	// With authentication on, membership changes need the root role.
	Conn etcdclient.Config
	// PeerTLS is how the other members' peer URLs are reached when none
	// of the endpoints answers (etcd's peer-transport-security: its
	// trusted CA, and the certificate the member presents to its peers).
	// Zero: Conn's TLS files.
	PeerTLS tlsfiles.Files
	// Timeout bounds the questions to one endpoint (the endpoints are
	// asked at once) and each membership call's dial. Default 5 s.
	Timeout time.Duration
	// WipeOnCorrupt lets a corrupt member of a multi-member cluster move
	// its data dir aside and rejoin when its source has no store: its
	// peers hold the data. Without it, Corrupt and no store refuse.
	WipeOnCorrupt bool
	// JoinTimeout bounds the wait for the first member to restore a
	// cluster this one then joins. Default 5 min.
	JoinTimeout time.Duration
	// KeepMovedAside is how many moved-aside data dirs a rejoin keeps.
	// Default 1; negative keeps them all.
	KeepMovedAside int
	// Retry bounds the membership calls of a join or rejoin.
	Retry member.RetryOptions
	// OnMember, when set, is told of each membership change a join or
	// rejoin made ("remove", "add-learner"), for the caller's metrics.
	OnMember func(op string, took time.Duration, err error)
	// OnWait, when set, is told why the start-up waits each time it
	// decides to wait (for the first member's restore, for peers that do
	// not answer), and "" once it no longer does: a wrapper's probes say
	// it.
	OnWait func(reason string)
	// Now names moved-aside data dirs. Default time.Now.
	Now func() time.Time
	// Logger: nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.JoinTimeout <= 0 {
		o.JoinTimeout = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retry.Logger == nil {
		o.Retry.Logger = o.Logger
	}
	return o
}

// Prepare runs the start-up: Assess makes the plan, Carry carries it out.
// It returns the plan etcd starts with, or an error that says why the
// member must not start (a *Refusal when the plan refuses).
func Prepare(ctx context.Context, cfg Config, src Preparer, o Options) (Plan, error) {
	p, _, err := Assess(ctx, cfg, src, o)
	if err != nil {
		return p, err
	}
	return Carry(ctx, cfg, src, p, o)
}

// Assess makes the start-up's plan: src checks the data dir and the
// backups for the release the member runs; then Decide's table picks the
// action. While the plan is to
// wait (Retry: another member restores the cluster, or a peer does not
// answer), it decides again every 2 s, for at most JoinTimeout, and then
// refuses. Nothing else changes: Carry does what the plan says.
func Assess(ctx context.Context, cfg Config, src Preparer, o Options) (Plan, Check, error) {
	o = o.withDefaults()
	log := o.Logger
	chk, err := src.Check(ctx, cfg)
	if err != nil {
		return Plan{}, chk, err
	}
	log.Info("startup: data dir validated", "clean_shutdown", cfg.CleanShutdown, "etcd", cfg.etcd(), "verdict", chk.Verdict, "reason", chk.Reason,
		"revision", chk.Revision, "backups", chk.Backups, "backup_revision", chk.BackupRevision)
	deadline := time.Now().Add(o.JoinTimeout)
	for {
		p, err := Decide(ctx, cfg, chk, o)
		if err != nil {
			return p, chk, err
		}
		if o.OnWait != nil {
			waiting := ""
			if p.Retry {
				waiting = p.Reason
			}
			o.OnWait(waiting)
		}
		if !p.Retry {
			return p, chk, nil
		}
		if time.Now().After(deadline) {
			p.Retry, p.Reason = false, fmt.Sprintf("after %s: %s", o.JoinTimeout, p.Reason)
			return p, chk, nil
		}
		log.Info("startup: waiting", "reason", p.Reason)
		select {
		case <-ctx.Done():
			return p, chk, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// Refusal is the error of a plan that refuses: the member must not start,
// for the plan's reason (and Err, when carrying the plan out failed). Its
// Remedies are what the caller may give the member; a binary names them
// by its own flags.
type Refusal struct {
	Plan Plan
	Err  error
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return fmt.Sprintf("refusing to start: %s: %v", r.Plan.Reason, r.Err)
	}
	return "refusing to start: " + r.Plan.Reason
}

func (r *Refusal) Unwrap() error { return r.Err }

// Carry carries out a plan Assess made: a refusal is a *Refusal, a
// restore goes through src (a failed one leaves the data dir as it was,
// and refuses: starting on it would serve a past the backups have moved
// beyond), a join or rejoin through Apply. It returns the plan etcd
// starts with.
func Carry(ctx context.Context, cfg Config, src Preparer, p Plan, o Options) (Plan, error) {
	o = o.withDefaults()
	switch p.Action {
	case Refuse:
		return p, &Refusal{Plan: p}
	case Restore:
		res, err := src.Restore(ctx, cfg, p)
		if err != nil {
			refused := p
			refused.Action, refused.Reason = Refuse, p.Reason+", and the restore failed (the data dir is as it was)"
			return refused, &Refusal{Plan: refused, Err: err}
		}
		o.Logger.Info("startup: restored", "revision", res.Revision, "replayed", res.Revisions, "moved_aside", res.MovedAside)
	case Rejoin, JoinAsLearner:
		return Apply(ctx, cfg, p, o)
	case Restart:
		switch {
		case !cfg.multiMember() || len(cfg.Endpoints) == 0:
		case p.ID == 0:
			// No member listed the cluster just now: it restarts as a
			// whole or has no quorum, and would answer nobody until this
			// member is up too. Asking would hold etcd's start for the
			// whole timeout.
			o.Logger.Info("startup: whether this member's etcd user may change membership is not checked: the cluster did not list its members; it is checked at a start beside a running cluster")
		default:
			checkMembershipRights(ctx, cfg, o)
		}
	}
	return p, nil
}

// checkMembershipRights says at start, not when a rejoin needs them, that
// this member's etcd user may not change membership: etcd allows that to
// the root role only, and a member that loses its data rejoins through
// its peers with those rights (with client certificates, the user is the
// certificate's common name).
func checkMembershipRights(ctx context.Context, cfg Config, o Options) {
	cli, err := membershipClient(ctx, o.Conn, o.Timeout, cfg.Endpoints)
	if err == nil {
		_ = cli.Close()
		return
	}
	if errors.Is(err, etcdclient.ErrUnreachable) {
		return
	}
	o.Logger.Warn("startup: this member could not rejoin its cluster after losing its data: its etcd user may not change membership; fix it now", "error", err)
}
