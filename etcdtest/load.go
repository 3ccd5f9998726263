package etcdtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Load writes a key under /load/ every few milliseconds until checked,
// each put with a generous timeout, and counts the puts that failed:
// operations that keep a cluster available (membership changes,
// defragmentation) must not make any fail.
type Load struct {
	stop     context.CancelFunc
	done     sync.WaitGroup
	writes   atomic.Int64
	failures atomic.Int64
	// firstErr is a pointer: errors of different types may come first,
	// and an atomic.Value holds one type only.
	firstErr atomic.Pointer[error]
}

// StartLoad starts writing through cli; the test's end stops it.
func StartLoad(t testing.TB, cli *clientv3.Client) *Load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{stop: cancel}
	l.done.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := cli.Put(pctx, fmt.Sprintf("/load/%06d", i), fmt.Sprintf("value %d", i))
			cancel()
			if err != nil {
				l.failures.Add(1)
				l.firstErr.CompareAndSwap(nil, &err)
			} else {
				l.writes.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Cleanup(l.end)
	return l
}

func (l *Load) end() {
	l.stop()
	l.done.Wait()
}

// Check stops the load and fails the test if any write failed or too few
// were made for the load to mean anything.
func (l *Load) Check(t testing.TB) {
	t.Helper()
	l.end()
	if n := l.failures.Load(); n > 0 {
		t.Fatalf("%d of %d writes failed, the first with: %v", n, n+l.writes.Load(), l.first())
	}
	if l.writes.Load() < 10 {
		t.Fatalf("only %d writes: the load did not run", l.writes.Load())
	}
	t.Logf("%d writes, none failed", l.writes.Load())
}

// Ran stops the load and fails the test only if too few writes succeeded
// to mean anything: for tests that move the leader, where etcd itself may
// time out a write in flight across the hand-over, and what is checked is
// what the writes left behind.
func (l *Load) Ran(t testing.TB) {
	t.Helper()
	l.end()
	if l.writes.Load() < 10 {
		t.Fatalf("only %d writes: the load did not run", l.writes.Load())
	}
	t.Logf("%d writes; %d failed across leader moves (first: %v)", l.writes.Load(), l.failures.Load(), l.first())
}

// first is the first failed write's error, nil when none failed.
func (l *Load) first() error {
	if p := l.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}
