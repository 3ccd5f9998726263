package capture

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// guard checks, before each object an uploader writes, that the cluster is
// still the one it placed its backups for.
type guard struct {
	cli *clientv3.Client
	st  store.Store
	lin snapshot.Lineage

	mu sync.Mutex
	// index is the highest raft index each endpoint's member answered.
	index map[string]uint64
}

func newGuard(ctx context.Context, cli *clientv3.Client, st store.Store, lin snapshot.Lineage) *guard {
	g := &guard{cli: cli, st: st, lin: lin, index: map[string]uint64{}}
	_ = g.raftLog(ctx)
	return g
}

// check fails with snapshot.ErrReplaced when a member's raft index went back, and
// with snapshot.ErrRestoredElsewhere when a restore of the cluster was recorded
// since the backups were placed.
func (g *guard) check(ctx context.Context) error {
	if err := g.raftLog(ctx); err != nil {
		return err
	}
	keys, err := snapshot.RestoreRecords(ctx, g.st, g.lin.ClusterID)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !slices.Contains(g.lin.Restores, k) {
			return fmt.Errorf("%w: %s records a restore of cluster %s after this uploader placed its backups, and its members did not restart: the restored cluster's backups go on, this one's stop (restart this sidecar if this member is the restored one)",
				snapshot.ErrRestoredElsewhere, k, g.lin.ClusterID)
		}
	}
	return nil
}

// raftLog asks each endpoint's member its raft index: a raft log only
// grows, so one that went back is another log.
func (g *guard) raftLog(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ep := range g.cli.Endpoints() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := g.cli.Status(sctx, ep)
		cancel()
		if err != nil {
			// Down or slow: it says nothing either way.
			continue
		}
		if seen := g.index[ep]; st.RaftIndex < seen {
			return fmt.Errorf("%w: the member at %s is at raft index %d, it was at %d", snapshot.ErrReplaced, ep, st.RaftIndex, seen)
		}
		g.index[ep] = st.RaftIndex
	}
	return nil
}
