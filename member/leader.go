package member

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Self is one member as it reports itself.
type Self struct {
	ID, Leader uint64
	ClusterID  uint64
	Learner    bool
	Revision   int64
	// Endpoint is the client URL that answered.
	Endpoint string
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
	return Self{ID: resp.Header.GetMemberId(), ClusterID: resp.Header.GetClusterId(), Leader: resp.Leader, Learner: resp.IsLearner, Revision: resp.Header.GetRevision(), Endpoint: endpoint}, nil
}

// FollowOptions configures Follow. The zero value asks every 500 ms with
// a 2 s timeout.
type FollowOptions struct {
	// Interval between two asks. Default 500 ms.
	Interval time.Duration
	// Timeout of each ask. Default 2 s.
	Timeout time.Duration
}

// Follow asks the member at endpoint (with endpoint "", the cluster:
// Ask) who it is every interval and calls f with each answer (err set
// when it did not answer) until ctx ends.
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
		f(Ask(ctx, cli, endpoint, o.Timeout))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// AskLeader asks every endpoint of cli at once who leads, each bounded by
// timeout, for a process that backs a cluster up from outside it: the
// leader's own answer as soon as it comes (a member that is down is not
// waited for), else the answer of a member that names a leader (a leader
// outside the endpoints given still leads). It fails when no member
// answers, or none names a leader: a member cut off from a quorum stops
// naming one (check-quorum), so a minority's answers are not taken for a
// working cluster.
func AskLeader(ctx context.Context, cli *clientv3.Client, timeout time.Duration) (Self, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	eps := cli.Endpoints()
	type answer struct {
		self Self
		err  error
	}
	answers := make(chan answer, len(eps))
	for _, ep := range eps {
		go func() {
			self, err := AskSelf(ctx, cli, ep, timeout)
			answers <- answer{self, err}
		}()
	}
	var named *Self
	var errs []error
	for range eps {
		a := <-answers
		switch {
		case a.err != nil:
			errs = append(errs, a.err)
		case a.self.IsLeader():
			return a.self, nil
		case a.self.Leader != 0 && named == nil:
			named = &a.self
		}
	}
	if named != nil {
		return *named, nil
	}
	if err := errors.Join(errs...); err != nil {
		return Self{}, fmt.Errorf("no member of %s names a leader: %w", strings.Join(eps, ","), err)
	}
	return Self{}, fmt.Errorf("no member of %s names a leader: the cluster elects one, or has lost its quorum", strings.Join(eps, ","))
}

// Ask asks the member at endpoint (AskSelf), or with endpoint "" the
// cluster at cli's endpoints for its leader (AskLeader).
func Ask(ctx context.Context, cli *clientv3.Client, endpoint string, timeout time.Duration) (Self, error) {
	if endpoint == "" {
		return AskLeader(ctx, cli, timeout)
	}
	return AskSelf(ctx, cli, endpoint, timeout)
}
