package startup

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdkit/etcdkit/internal/datadir"
	"github.com/etcdkit/etcdkit/member"
)

// Apply carries out the membership part of a plan, in an order that a
// crash at any step leaves a state the next Decide picks up from:
//   - Rejoin: move the data dir aside, remove the member, add it as a
//     learner;
//   - JoinAsLearner: add it as a learner, unless it is listed already.
//
// It returns the plan with the initial cluster etcd must start with and
// the member's ID. Other actions are returned as they are.
func Apply(ctx context.Context, cfg Config, p Plan, o Options) (Plan, error) {
	if p.Action != Rejoin && p.Action != JoinAsLearner {
		return p, nil
	}
	o = o.withDefaults()
	cli, err := membershipClient(ctx, o.Conn, o.Timeout, cfg.Endpoints)
	if err != nil {
		return p, fmt.Errorf("startup: member %s: %w", cfg.Member.Name, err)
	}
	defer func() { _ = cli.Close() }()
	if p.Action == Rejoin {
		if err := moveAside(cfg, o); err != nil {
			return p, fmt.Errorf("startup: member %s: %w", cfg.Member.Name, err)
		}
		if p.ID != 0 {
			start := time.Now()
			err := member.Remove(ctx, cli, p.ID, o.Retry)
			o.told("remove", start, err)
			if err != nil {
				return p, err
			}
			p.ID = 0
		}
	}
	if p.ID == 0 {
		start := time.Now()
		m, members, err := member.AddLearner(ctx, cli, cfg.Member.PeerURLs, o.Retry)
		o.told("add-learner", start, err)
		if err != nil {
			return p, err
		}
		p.ID = m.ID
		p.InitialCluster = initialCluster(members, cfg)
		o.Logger.Info("startup: added as learner", "member", cfg.Member.Name, "id", fmt.Sprintf("%x", m.ID))
		member.Settle(ctx, cli, 10*time.Second, o.Logger)
	}
	// Its peers fill it: once moved aside, it holds nothing they do not.
	if err := datadir.MarkBuilt(cfg.Member.DataDir, "join", o.Now()); err != nil {
		return p, fmt.Errorf("startup: member %s: %w", cfg.Member.Name, err)
	}
	p.ClusterState, p.Learner = "existing", true
	return p, nil
}

// told tells OnMember of a membership change.
func (o Options) told(op string, start time.Time, err error) {
	if o.OnMember != nil {
		o.OnMember(op, time.Since(start), err)
	}
}
