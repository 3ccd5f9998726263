package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RetryOptions bound the membership calls that etcd refuses for a while
// and then accepts. The zero value retries for 2 minutes, backing off
// from 100 ms to 5 s, each call bounded by 10 s.
type RetryOptions struct {
	// Deadline is how long to keep retrying. Default 2 min.
	Deadline time.Duration
	// Backoff is the first wait; it doubles up to MaxBackoff. Defaults
	// 100 ms and 5 s.
	Backoff, MaxBackoff time.Duration
	// AttemptTimeout bounds each call, which is then retried. etcd waits
	// for a membership change with the caller's context alone, and raft
	// drops a change proposed while another is pending: without a bound
	// such a call never returns. Default 10 s.
	AttemptTimeout time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
}

func (o RetryOptions) withDefaults() RetryOptions {
	if o.Deadline <= 0 {
		o.Deadline = 2 * time.Minute
	}
	if o.Backoff <= 0 {
		o.Backoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// retry calls f until it succeeds, fails with an error retryable does not
// accept, or the deadline passes.
func retry(ctx context.Context, o RetryOptions, what string, retryable func(error) bool, f func(context.Context) error) error {
	o = o.withDefaults()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.Deadline)
	defer cancel()
	wait := o.Backoff
	// refused is the last refusal: what an attempt the deadline cuts
	// short reports, rather than the deadline itself.
	var refused error
	gaveUp := func() error {
		took := time.Since(start).Round(time.Millisecond)
		if refused == nil {
			return fmt.Errorf("%s: no answer in %s: %w", what, took, ctx.Err())
		}
		return fmt.Errorf("%s: gave up after %s: %w", what, took, refused)
	}
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, o.AttemptTimeout)
		err := f(actx)
		expired := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		acancel()
		if err != nil && ctx.Err() != nil {
			return gaveUp()
		}
		if err == nil || (!expired && !retryable(err)) {
			return err
		}
		refused = err
		o.Logger.Info("member: retrying", "call", what, "attempt", attempt, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return gaveUp()
		case <-time.After(wait):
		}
		wait = min(2*wait, o.MaxBackoff)
	}
}

// AddLearner adds a learner with the peer URLs and returns it and the
// member list after the add. etcd refuses while another learner is
// pending (--max-learners) or a member was connected only for a few
// seconds (strict reconfiguration check), and times the add out when raft
// drops it because another configuration change (a promotion) is
// pending; all pass, and are retried until the deadline. A timed-out add
// that went through after all is found by its peer URLs.
func AddLearner(ctx context.Context, cli *clientv3.Client, peerURLs []string, o RetryOptions) (*pb.Member, []*pb.Member, error) {
	var (
		resp  *clientv3.MemberAddResponse
		again bool
	)
	err := retry(ctx, o, "add learner", func(err error) bool {
		return errors.Is(err, rpctypes.ErrTooManyLearners) || errors.Is(err, rpctypes.ErrUnhealthy) ||
			errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail)
	}, func(ctx context.Context) error {
		var err error
		resp, err = cli.MemberAddAsLearner(ctx, peerURLs)
		if errors.Is(err, rpctypes.ErrPeerURLExist) && again {
			// An earlier attempt that timed out went through after all.
			resp, err = pendingLearner(ctx, cli, peerURLs)
		}
		again = true
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("member: add learner %v: %w", peerURLs, err)
	}
	return resp.Member, resp.Members, nil
}

// pendingLearner is the learner with peerURLs that no etcd has started as
// yet, as the response of the add that created it.
func pendingLearner(ctx context.Context, cli *clientv3.Client, peerURLs []string) (*clientv3.MemberAddResponse, error) {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	want := slices.Sorted(slices.Values(peerURLs))
	for _, m := range list.Members {
		if m.IsLearner && m.Name == "" && slices.Equal(slices.Sorted(slices.Values(m.PeerURLs)), want) {
			return &clientv3.MemberAddResponse{Member: m, Members: list.Members}, nil
		}
	}
	return nil, rpctypes.ErrPeerURLExist
}

// PromoteWhenReady promotes the learner once it has caught up with the
// leader: etcd refuses until then, and that is retried until the
// deadline. A member that is no longer a learner is done.
func PromoteWhenReady(ctx context.Context, cli *clientv3.Client, id uint64, o RetryOptions) error {
	err := retry(ctx, o, "promote", func(err error) bool {
		// etcd times a promotion out when another promotion of the same
		// learner (its sidecar's, its wrapper's) won the race: asked
		// again, it says the member is no longer a learner.
		return errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrTimeout)
	}, func(ctx context.Context) error {
		_, err := cli.MemberPromote(ctx, id)
		return err
	})
	if errors.Is(err, rpctypes.ErrMemberNotLearner) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("member: promote %x: %w", id, err)
	}
	return nil
}

// Remove removes a member; one already gone is done.
func Remove(ctx context.Context, cli *clientv3.Client, id uint64, o RetryOptions) error {
	// A removal answered by the member removed ends in "server stopped";
	// one raft dropped times out: asked again, another member says the
	// member is gone.
	err := retry(ctx, o, "remove", func(err error) bool {
		return errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrStopped) || errors.Is(err, rpctypes.ErrTimeout)
	},
		func(ctx context.Context) error {
			_, err := cli.MemberRemove(ctx, id)
			return err
		})
	if errors.Is(err, rpctypes.ErrMemberNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("member: remove %x: %w", id, err)
	}
	return nil
}

// UpdatePeerURLs changes a member's advertised peer URLs.
func UpdatePeerURLs(ctx context.Context, cli *clientv3.Client, id uint64, peerURLs []string, o RetryOptions) error {
	err := retry(ctx, o, "update peer URLs", func(err error) bool { return errors.Is(err, rpctypes.ErrUnhealthy) },
		func(ctx context.Context) error {
			_, err := cli.MemberUpdate(ctx, id, peerURLs)
			return err
		})
	if err != nil {
		return fmt.Errorf("member: update %x to %v: %w", id, peerURLs, err)
	}
	return nil
}

// Settle waits, for at most timeout, until every started member has
// applied the raft log as far as the leader had when it was called. A
// joining member asks its peers for the membership and believes the first
// that answers; a follower that has not yet applied the add still lists
// the old members, and etcd then refuses to start ("member count is
// unequal"). Members that do not answer are skipped: the joining member
// cannot ask them either.
func Settle(ctx context.Context, cli *clientv3.Client, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return
	}
	var endpoints []string
	for _, m := range resp.Members {
		if len(m.ClientURLs) > 0 {
			endpoints = append(endpoints, m.ClientURLs[0])
		}
	}
	var target uint64
	for _, ep := range endpoints {
		if st, err := cli.Status(ctx, ep); err == nil {
			target = max(target, st.RaftIndex)
		}
	}
	for _, ep := range endpoints {
		for {
			st, err := cli.Status(ctx, ep)
			if err != nil || st.RaftAppliedIndex >= target {
				break
			}
			select {
			case <-ctx.Done():
				log.Warn("member: peers still behind the membership change", "member", ep, "applied", st.RaftAppliedIndex, "want", target)
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}
