package capture

import (
	"context"
	"fmt"

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
	return func(ctx context.Context) (*clientv3.Client, func(), error) {
		f, err := member.Follower(ctx, cli, member.InspectOptions{})
		if err != nil {
			return nil, nil, err
		}
		c := conn
		c.Endpoints = []string{f.Endpoint}
		c.AllowUnreachable = false
		fc, err := etcdclient.New(ctx, c)
		if err != nil {
			return nil, nil, fmt.Errorf("follower %s at %s: %w", f.Name, f.Endpoint, err)
		}
		return fc, func() { _ = fc.Close() }, nil
	}
}
