package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/store"
)

// standby is a restore.Follow of the restore bench's chain while it is
// captured: how long each delta waits, after it lands, to be in the
// standby, and once the capture ends, how long the standby takes from
// "the primary is lost" to serving, against a plain restore of the chain.
type standby struct {
	dir  string
	peer url.URL
	mu   sync.Mutex
	land map[int64]time.Time // a delta's last revision: when it landed
	seen []standbyAt
	stop func() (restore.Result, error)
}

type standbyAt struct {
	rev int64
	at  time.Time
}

func newStandby(dir string) (*standby, error) {
	peer, _, err := etcdtest.FreeURLs()
	return &standby{dir: dir, peer: peer, land: map[int64]time.Time{}}, err
}

// member is the standby's data dir's member, and a plain restore's.
func (s *standby) member(dataDir string) restore.Options {
	return restore.Options{Member: member.Spec{DataDir: dataDir, Name: "standby", PeerURLs: []string{s.peer.String()}}}
}

// landed is the Snapshotter's OnResult.
func (s *standby) landed(r capture.Result) {
	if r.Op == capture.OpDelta && r.Err == nil {
		s.mu.Lock()
		s.land[r.Snapshot.LastRevision] = time.Now()
		s.mu.Unlock()
	}
}

func (s *standby) options() restore.FollowOptions {
	return restore.FollowOptions{Restore: s.member(s.dir),
		Applied: func(st restore.Standby) {
			s.mu.Lock()
			s.seen = append(s.seen, standbyAt{st.Revision, time.Now()})
			s.mu.Unlock()
		}}
}

// follow starts the follower; the store holds the chain's full already.
func (s *standby) follow(ctx context.Context, st store.Store) {
	ctx, cancel := context.WithCancel(ctx)
	type ended struct {
		res restore.Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := restore.Follow(ctx, st, s.options())
		done <- ended{res, err}
	}()
	s.stop = func() (restore.Result, error) {
		cancel()
		e := <-done
		return e.res, e.err
	}
}

// reached is when the standby first held rev, or false.
func (s *standby) reached(rev int64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reachedLocked(rev)
}

// rows waits for the standby to reach head, reports the follow lag, then
// times its promotion to a serving member cfg.runs times (each run
// resumes the standby first), against a restore of the same chain and the
// member's start.
func (s *standby) rows(ctx context.Context, cfg config, st store.Store, head int64) ([]row, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, ok := s.reached(head); ok {
			break
		}
		if time.Now().After(deadline) {
			_, _ = s.stop()
			return nil, fmt.Errorf("the standby did not reach revision %d in 5 minutes", head)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.mu.Lock()
	var lags []time.Duration
	for rev, at := range s.land {
		if got, ok := s.reachedLocked(rev); ok {
			lags = append(lags, got.Sub(at))
		}
	}
	s.mu.Unlock()
	if len(lags) == 0 {
		_, _ = s.stop()
		return nil, errors.New("the standby saw no delta land")
	}
	slices.Sort(lags)
	rows := []row{{
		Subject: "standby: follow lag", Op: fmt.Sprintf("%d deltas under 32 writers", len(lags)),
		Ours: lags[len(lags)-1], Reference: "goal: delta period + 1 s", Ref: deltaPeriod + time.Second, Time: true,
		Note: fmt.Sprintf("worst time from a delta's landing to the standby holding it (median %.2fs); the store is listed every second", lags[len(lags)/2].Seconds()),
	}}

	var promote, plain []time.Duration
	var res restore.Result
	for i := range cfg.runs {
		if i > 0 {
			s.mu.Lock()
			s.seen = nil
			s.mu.Unlock()
			s.follow(ctx, st)
			for {
				if _, ok := s.reached(head); ok {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		start := time.Now()
		var err error
		if res, err = s.stop(); err != nil {
			return nil, err
		}
		if err := s.serve(s.dir); err != nil {
			return nil, err
		}
		promote = append(promote, time.Since(start))
		if err := os.RemoveAll(s.dir); err != nil {
			return nil, err
		}

		dir := s.dir + "-plain"
		start = time.Now()
		if _, err := restore.Restore(ctx, st, s.member(dir)); err != nil {
			return nil, err
		}
		if err := s.serve(dir); err != nil {
			return nil, err
		}
		plain = append(plain, time.Since(start))
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	if err := os.RemoveAll(s.dir + ".standby"); err != nil {
		return nil, err
	}
	if res.Revision != head {
		return nil, fmt.Errorf("the standby became a data dir at revision %d, the chain ends at %d", res.Revision, head)
	}
	return append(rows, row{
		Subject: "standby: primary lost → standby serving", Op: fmt.Sprintf("full + %d revisions", head-res.Chain.Full.LastRevision),
		Ours: median(promote), Reference: "restore of the same chain, then the member's start", Ref: median(plain), Time: true,
		Note: "stopping the follower (a copy of the standby made a data dir) and the member's start, until it serves",
	}), nil
}

func (s *standby) reachedLocked(rev int64) (time.Time, bool) {
	for _, r := range s.seen {
		if r.rev >= rev {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// serve starts a member on the data dir dir and stops it once it serves.
func (s *standby) serve(dir string) error {
	_, client, err := etcdtest.FreeURLs()
	if err != nil {
		return err
	}
	m, err := start(dir, "standby", s.peer, client, true)
	if err != nil {
		return err
	}
	m.close()
	return nil
}
