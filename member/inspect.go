package member

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status is one member as the cluster lists it and as it answers.
type Status struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
	// Leader: this member is the leader, as the members that answered say.
	Leader bool
	// Err is why the member did not answer Status in time; the fields
	// below are zero then.
	Err error
	// Endpoint is the client URL that answered.
	Endpoint    string
	Version     string
	Revision    int64
	RaftIndex   uint64
	DBSize      int64
	DBSizeInUse int64
	DBSizeQuota int64

	// leader is the leader's ID as this member reported it.
	leader uint64
}

// Healthy says whether the member answered.
func (s Status) Healthy() bool { return s.Err == nil }

// InspectOptions configures Inspect. The zero value asks each member with
// a 5 s timeout.
type InspectOptions struct {
	// Timeout bounds each member's Status call. Default 5 s.
	Timeout time.Duration
}

// Inspect lists the cluster's members and asks each for its status, all
// at once, each bounded by its own timeout: one member that hangs does
// not hide the others. The list comes from a linearizable MemberList, so
// it fails when the cluster has no quorum.
func Inspect(ctx context.Context, cli *clientv3.Client, opts InspectOptions) ([]Status, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	out := make([]Status, len(list.Members))
	var wg sync.WaitGroup
	for i, m := range list.Members {
		out[i] = Status{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner}
		wg.Go(func() { out[i].ask(ctx, cli, opts.Timeout) })
	}
	wg.Wait()
	var leader uint64
	for _, s := range out {
		if s.Err == nil && s.leader != 0 {
			leader = s.leader
		}
	}
	for i := range out {
		out[i].Leader = out[i].ID == leader
	}
	slices.SortFunc(out, func(a, b Status) int { return compareName(a.Name, b.Name) })
	return out, nil
}

// ask fills s from the first of its client URLs that answers Status.
func (s *Status) ask(ctx context.Context, cli *clientv3.Client, timeout time.Duration) {
	if len(s.ClientURLs) == 0 {
		s.Err = fmt.Errorf("member %s has not started: it has no client URL", s.label())
		return
	}
	for _, ep := range s.ClientURLs {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			s.Err = fmt.Errorf("member %s at %s: status: %w", s.label(), ep, err)
			continue
		}
		*s = Status{
			ID: s.ID, Name: s.Name, PeerURLs: s.PeerURLs, ClientURLs: s.ClientURLs, Learner: s.Learner,
			Endpoint: ep, Version: resp.Version, Revision: resp.Header.GetRevision(), RaftIndex: resp.RaftIndex,
			DBSize: resp.DbSize, DBSizeInUse: resp.DbSizeInUse, DBSizeQuota: resp.DbSizeQuota,
			leader: resp.Leader,
		}
		return
	}
}

func (s Status) label() string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("%x", s.ID)
}

// compareName orders members by name, unstarted ones (no name) last.
func compareName(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	case a < b:
		return -1
	}
	return 1
}

// ErrNoFollower: no member qualifies as a healthy follower.
var ErrNoFollower = errors.New("no healthy follower: every voting member but the leader is down, behind or missing")

// followerLag is how far behind the leader's raft index a follower may be
// and still count as healthy: a few seconds of writes at most.
const followerLag = 5000

// Follower picks the follower a heavy read (a full snapshot's stream) should
// load instead of the leader: a voting member that is not the leader,
// answers Status, and has applied within a few thousand entries of the
// leader's raft index; among several, the one furthest along. The leader
// must answer too, or no follower can be judged.
func Follower(ctx context.Context, cli *clientv3.Client, opts InspectOptions) (Status, error) {
	all, err := Inspect(ctx, cli, opts)
	if err != nil {
		return Status{}, err
	}
	var leader *Status
	for i := range all {
		if all[i].Leader && all[i].Healthy() {
			leader = &all[i]
		}
	}
	if leader == nil {
		return Status{}, fmt.Errorf("%w (the leader did not answer)", ErrNoFollower)
	}
	var best *Status
	for i := range all {
		s := &all[i]
		if s.Leader || s.Learner || !s.Healthy() || s.RaftIndex+followerLag < leader.RaftIndex {
			continue
		}
		if best == nil || s.RaftIndex > best.RaftIndex {
			best = s
		}
	}
	if best == nil {
		return Status{}, ErrNoFollower
	}
	return *best, nil
}
