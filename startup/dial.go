package startup

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/member"
)

// membershipClient is the one way a start-up reaches a cluster to change
// its membership: endpoints through conn's TLS and credentials, whose
// user must hold the root role (etcd refuses membership changes to any
// other), the dial bounded by timeout (0: conn's own).
func membershipClient(ctx context.Context, conn etcdclient.Config, timeout time.Duration, endpoints []string) (*clientv3.Client, error) {
	conn = conn.With(endpoints...)
	conn.RequireRoot = true
	if timeout > 0 {
		conn.DialTimeout = timeout
	}
	return etcdclient.New(ctx, conn)
}

// Promote promotes learner id once it has caught up, asking endpoints:
// a learner answers neither a promotion nor a login, so they are the
// other members' where there are any.
func Promote(ctx context.Context, conn etcdclient.Config, endpoints []string, id uint64, retry member.RetryOptions) error {
	cli, err := membershipClient(ctx, conn, 0, endpoints)
	if err != nil {
		return fmt.Errorf("startup: promote %x: %w", id, err)
	}
	defer func() { _ = cli.Close() }()
	return member.PromoteWhenReady(ctx, cli, id, retry)
}
