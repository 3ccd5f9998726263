package capture

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/member"
)

// FromFollower is an Options.FullFrom that streams each full snapshot
// from a healthy follower of cli's cluster (member.Follower), reached with
// conn's TLS and authentication: a full of a large database then loads a
// follower for its minutes instead of the leader, whose writes it would
// slow (etcd-druid#1259). A cluster of one member, or one whose followers
// are down or behind, streams from the Snapshotter's own member.
func FromFollower(cli *clientv3.Client, conn etcdclient.Config) func(context.Context) (*clientv3.Client, func(), error) {
	return fullFrom(conn, func(ctx context.Context) (string, string, error) {
		f, err := member.Follower(ctx, cli, member.InspectOptions{})
		return "follower " + f.Name, f.Endpoint, err
	})
}

// FromLeader is an Options.FullFrom that streams each full snapshot from
// the member that leads among cli's endpoints (member.AskLeader), reached
// with conn's TLS and authentication: a Snapshotter that backs a cluster
// up from outside it talks to whichever member its client's balancer
// picks, and the leader is the member that holds every revision already
// in a delta. When the leader does not answer, the full streams from the
// Snapshotter's own client.
func FromLeader(cli *clientv3.Client, conn etcdclient.Config) func(context.Context) (*clientv3.Client, func(), error) {
	return fullFrom(conn, func(ctx context.Context) (string, string, error) {
		self, err := member.AskLeader(ctx, cli, 5*time.Second)
		if err == nil && !self.IsLeader() {
			err = fmt.Errorf("leader %x is not among the endpoints given", self.Leader)
		}
		return "leader", self.Endpoint, err
	})
}

// fullFrom opens a client to the one member pick names.
func fullFrom(conn etcdclient.Config, pick func(context.Context) (what, endpoint string, err error)) func(context.Context) (*clientv3.Client, func(), error) {
	return func(ctx context.Context) (*clientv3.Client, func(), error) {
		what, ep, err := pick(ctx)
		if err != nil {
			return nil, nil, err
		}
		c := conn
		c.Endpoints = []string{ep}
		c.AllowUnreachable = false
		fc, err := etcdclient.New(ctx, c)
		if err != nil {
			return nil, nil, fmt.Errorf("%s at %s: %w", what, ep, err)
		}
		return fc, func() { _ = fc.Close() }, nil
	}
}
