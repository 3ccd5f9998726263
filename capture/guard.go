package capture

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// silent are the endpoints that did not answer the last check.
	silent map[string]bool
}

// The longest a check waits for a member's answer: one that answered the
// last check, and one that did not (hung, stopped, cut off) or was not
// asked yet, which is asked at every object but not waited for as long,
// so that a hung member does not slow every upload of the others.
const (
	statusTimeout       = 5 * time.Second
	silentStatusTimeout = 500 * time.Millisecond
)

func newGuard(ctx context.Context, cli *clientv3.Client) *guard {
	// The first answers are only recorded, so no member is waited for
	// long: the uploads of a new leader, after its predecessor hung, do
	// not wait for it.
	g := &guard{cli: cli, index: map[string]uint64{}, silent: map[string]bool{}}
	for _, ep := range cli.Endpoints() {
		g.silent[ep] = true
	}
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

// raftLog asks each endpoint's member its raft index, all at once: a raft
// log only grows, so one that went back is another log.
func (g *guard) raftLog(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	type answer struct {
		ep             string
		index, cluster uint64
		err            error
	}
	eps := g.cli.Endpoints()
	answers := make(chan answer, len(eps))
	for _, ep := range eps {
		timeout := statusTimeout
		if g.silent[ep] {
			timeout = silentStatusTimeout
		}
		go func() {
			sctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			st, err := g.cli.Status(sctx, ep)
			if err != nil {
				answers <- answer{ep: ep, err: err}
				return
			}
			answers <- answer{ep: ep, index: st.RaftIndex, cluster: st.Header.GetClusterId()}
		}()
	}
	var replaced error
	clusters := map[uint64]string{}
	for range eps {
		a := <-answers
		if a.err == nil {
			clusters[a.cluster] = a.ep
		}
		// Down or slow: it says nothing either way.
		g.silent[a.ep] = a.err != nil
		switch seen := g.index[a.ep]; {
		case a.err != nil:
		case a.index < seen:
			replaced = fmt.Errorf("%w: the member at %s is at raft index %d, it was at %d", ErrReplaced, a.ep, a.index, seen)
		default:
			g.index[a.ep] = a.index
		}
	}
	if len(clusters) > 1 {
		var named []string
		for id, ep := range clusters {
			named = append(named, fmt.Sprintf("%x at %s", id, ep))
		}
		slices.Sort(named)
		return fmt.Errorf("%w: %s; give the endpoints of one cluster", ErrTwoClusters, strings.Join(named, ", "))
	}
	return replaced
}

// ErrTwoClusters: the endpoints reach members of more than one cluster, so
// the events and fulls an uploader receives may be any of theirs: nothing
// is uploaded until they reach one.
var ErrTwoClusters = errors.New("the endpoints reach two clusters")

// ErrReplaced: a member of the cluster an uploader placed its backups
// for restarted on another raft log (its raft index went back: a
// restored data dir starts it again). Its events are another past's;
// the uploader drops what it holds and places its backups again.
var ErrReplaced = errors.New("a member restarted on another raft log: the cluster was restored or replaced")
