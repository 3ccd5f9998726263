package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// followerBench measures what a full snapshot costs the leader's writes
// when it streams from the leader and when it streams from a follower
// (etcd-backup serve --full-from follower): a cluster of three members
// filled with cfg.dbMiB of values, 32 writers putting 1 KiB values through
// the leader while a zstd full streams, and as long again without one. All
// three members run in this process, on this machine's cores: the
// follower's stream competes with the leader for CPU and disk here, where
// on three machines it would not.
func followerBench(ctx context.Context, cfg config) ([]row, error) {
	ms, err := startCluster(filepath.Join(cfg.dir, "etcd-3"), 3)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, m := range ms {
			m.close()
		}
	}()
	var leader, follower *embedded
	for _, m := range ms {
		s, err := m.cli.Status(ctx, m.endpoint)
		if err != nil {
			return nil, err
		}
		if s.Leader == s.Header.MemberId {
			leader = m
		} else if follower == nil {
			follower = m
		}
	}
	if leader == nil || follower == nil {
		return nil, errors.New("no leader and follower among the three members")
	}
	fmt.Fprintf(os.Stderr, "bench: writing a %d MiB database ...\n", cfg.dbMiB)
	if err := fill(ctx, leader.cli, int64(cfg.dbMiB)<<20); err != nil {
		return nil, err
	}
	st, err := store.NewFile(filepath.Join(cfg.dir, "follower-store"))
	if err != nil {
		return nil, err
	}
	during := func(from *embedded) (float64, time.Duration, error) {
		var took time.Duration
		n, err := writesWhile(ctx, leader.cli, func() error {
			start := time.Now()
			s, err := capture.Full(ctx, from.cli, st, snapshot.FullOptions{Codec: snapshot.Codec{Compression: snapshot.Zstd}, SpoolDir: cfg.dir})
			took = time.Since(start)
			if err == nil {
				err = st.Delete(ctx, s.Key)
			}
			return err
		})
		return float64(n) / took.Seconds(), took, err
	}
	var fromLeader, fromFollower, without []float64
	var leaderTook, followerTook []time.Duration
	for range cfg.runs {
		r, d, err := during(leader)
		if err != nil {
			return nil, err
		}
		fromLeader, leaderTook = append(fromLeader, r), append(leaderTook, d)
		if r, d, err = during(follower); err != nil {
			return nil, err
		}
		fromFollower, followerTook = append(fromFollower, r), append(followerTook, d)
		n, err := writesWhile(ctx, leader.cli, func() error {
			select {
			case <-time.After(d):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil {
			return nil, err
		}
		without = append(without, float64(n)/d.Seconds())
	}
	per := func(rate float64) time.Duration { return time.Duration(10000 / rate * float64(time.Second)) }
	lr, fr, wr := medianFloat(fromLeader), medianFloat(fromFollower), medianFloat(without)
	return []row{{
		Subject: "leader's writes during a full (zstd)", Op: "10,000 puts of 1 KiB, 32 writers, full from a follower", Bytes: int64(cfg.dbMiB) << 20,
		Ours: per(fr), Reference: "the same, full from the leader", Ref: per(lr), Time: true,
		Note: fmt.Sprintf("%.0f writes/s with the full from a follower (%.1fs), %.0f from the leader (%.1fs), %.0f without a full; three members in one process",
			fr, median(followerTook).Seconds(), lr, median(leaderTook).Seconds(), wr),
	}}, nil
}

// writesWhile puts 1 KiB values through cli from 32 writers while f runs
// and returns how many were acknowledged.
func writesWhile(ctx context.Context, cli *clientv3.Client, f func() error) (int64, error) {
	wctx, stop := context.WithCancel(ctx)
	var n atomic.Int64
	var wg sync.WaitGroup
	value := strings.Repeat("w", 1024)
	for w := range 32 {
		wg.Go(func() {
			for i := 0; wctx.Err() == nil; i++ {
				if _, err := cli.Put(wctx, fmt.Sprintf("/during/%02d/%04d", w, i%1000), value); err == nil {
					n.Add(1)
				}
			}
		})
	}
	err := f()
	stop()
	wg.Wait()
	return n.Load(), err
}

// startCluster starts n members of one cluster side by side.
func startCluster(dir string, n int) ([]*embedded, error) {
	peers, clients := make([]url.URL, n), make([]url.URL, n)
	var initial []string
	for i := range n {
		var err error
		if peers[i], clients[i], err = etcdtest.FreeURLs(); err != nil {
			return nil, err
		}
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peers[i].String()))
	}
	ms := make([]*embedded, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("m%d", i)
			ms[i], errs[i] = startIn(filepath.Join(dir, name), name, peers[i], clients[i], true, strings.Join(initial, ","))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range ms {
			if m != nil {
				m.close()
			}
		}
		return nil, err
	}
	return ms, nil
}

func medianFloat(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
