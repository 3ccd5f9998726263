package member

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Self is one member as it reports itself.
type Self struct {
	ID, Leader uint64
	ClusterID  uint64
	Learner    bool
	Revision   int64
}

// IsLeader says whether the member leads.
func (s Self) IsLeader() bool { return s.ID != 0 && s.ID == s.Leader }

// AskSelf asks the member at endpoint who it is and who leads, from its
// own view: a member cut off from the others stops naming a leader after
// an election timeout (etcd's check-quorum), so a stale leader does not
// say it leads for long.
func AskSelf(ctx context.Context, cli *clientv3.Client, endpoint string, timeout time.Duration) (Self, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.Status(ctx, endpoint)
	if err != nil {
		return Self{}, fmt.Errorf("member at %s: status: %w", endpoint, err)
	}
	return Self{ID: resp.Header.GetMemberId(), ClusterID: resp.Header.GetClusterId(), Leader: resp.Leader, Learner: resp.IsLearner, Revision: resp.Header.GetRevision()}, nil
}

// FollowOptions configures Follow. The zero value asks every 500 ms with
// a 2 s timeout.
type FollowOptions struct {
	// Interval between two asks. Default 500 ms.
	Interval time.Duration
	// Timeout of each ask. Default 2 s.
	Timeout time.Duration
}

// Follow asks the member at endpoint who it is every interval and calls
// f with each answer (err set when it did not answer) until ctx ends.
// etcd has no stream of leader changes; a Status call answered locally,
// twice a second, notices one within a second at the cost of nothing.
func Follow(ctx context.Context, cli *clientv3.Client, endpoint string, o FollowOptions, f func(Self, error)) {
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		f(AskSelf(ctx, cli, endpoint, o.Timeout))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
