package capture

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// guard checks, before each object an uploader writes, that the cluster is
// still the one it placed its backups for.
type guard struct {
	cli *clientv3.Client

	mu sync.Mutex
	// index is the highest raft index each endpoint's member answered.
	index map[string]uint64
}

func newGuard(ctx context.Context, cli *clientv3.Client) *guard {
	g := &guard{cli: cli, index: map[string]uint64{}}
	_ = g.raftLog(ctx)
	return g
}

// check fails with ErrReplaced when a member's raft index went
// back. A restore recorded meanwhile stops nothing: it may be a drill that
// no cluster runs from. A cluster that does run from it is placed by its
// own uploader, which records itself as the prefix's newest and so stops
// this one (snapshot.ErrNewerUploader), or begins a timeline that
// supersedes this one's.
func (g *guard) check(ctx context.Context) error {
	return g.raftLog(ctx)
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
			return fmt.Errorf("%w: the member at %s is at raft index %d, it was at %d", ErrReplaced, ep, st.RaftIndex, seen)
		}
		g.index[ep] = st.RaftIndex
	}
	return nil
}

// ErrReplaced: a member of the cluster an uploader placed its backups
// for restarted on another raft log (its raft index went back: a
// restored data dir starts it again). Its events are another past's;
// the uploader drops what it holds and places its backups again.
var ErrReplaced = errors.New("a member restarted on another raft log: the cluster was restored or replaced")
