package defrag_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/defrag"
	"github.com/etcdkit/etcdkit/etcdtest"
)

// fragment writes about mib MiB of values and deletes them: the database
// keeps its size, with most of it free once compacted.
func fragment(t *testing.T, cli *clientv3.Client, mib int) {
	t.Helper()
	ctx := context.Background()
	value := strings.Repeat("x", 8<<10)
	for i := range mib * 128 / 32 {
		ops := make([]clientv3.Op, 32)
		for j := range ops {
			ops[j] = clientv3.OpPut(fmt.Sprintf("/frag/%05d/%02d", i, j), value)
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "/frag/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
}

// sizes is each member's database size by client URL.
func sizes(t *testing.T, cli *clientv3.Client, c *etcdtest.Cluster) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, ep := range c.Endpoints() {
		s, err := cli.Status(context.Background(), ep)
		if err != nil {
			t.Fatal(err)
		}
		out[ep] = s.DbSize
	}
	return out
}

// stableSizes waits until two readings of every member's size agree.
func stableSizes(t *testing.T, cli *clientv3.Client, c *etcdtest.Cluster) map[string]int64 {
	t.Helper()
	last := sizes(t, cli, c)
	for range 50 {
		time.Sleep(200 * time.Millisecond)
		now := sizes(t, cli, c)
		if fmt.Sprint(now) == fmt.Sprint(last) {
			return now
		}
		last = now
	}
	t.Fatalf("the sizes do not settle: %v", last)
	return nil
}

// watchShrink polls every member's size and records when each first
// drops below half of what it was: the order defragmentation really
// happened in, seen from outside. stop waits (up to a minute) until every
// member was seen to shrink: the last one may be seen only after the run
// that defragmented it returned.
func watchShrink(t *testing.T, cli *clientv3.Client, before map[string]int64) (stop func() map[string]time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	shrunk := map[string]time.Time{}
	var wg sync.WaitGroup
	for ep, size := range before {
		wg.Go(func() {
			for ctx.Err() == nil {
				sctx, c := context.WithTimeout(ctx, time.Second)
				s, err := cli.Status(sctx, ep)
				c()
				if err == nil && s.DbSize < size/2 {
					mu.Lock()
					shrunk[ep] = time.Now()
					mu.Unlock()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	return func() map[string]time.Time {
		timer := time.AfterFunc(time.Minute, cancel)
		defer timer.Stop()
		wg.Wait()
		cancel()
		mu.Lock()
		defer mu.Unlock()
		return shrunk
	}
}

func TestDefragFollowersThenLeader(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	fragment(t, cli, 24)

	// A dry run changes nothing, and says every member would go. The
	// sizes are read once the backends have committed the deletes.
	before := stableSizes(t, cli, c)
	res, err := defrag.Run(ctx, cli, defrag.Options{CompactKeyspace: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Members) != 3 || res.CompactedTo != 0 {
		t.Fatalf("dry run: %+v", res)
	}
	for _, m := range res.Members {
		if m.Skipped != "" || m.SizeAfter != m.SizeBefore {
			t.Fatalf("dry run: member %s: %+v", m.Name, m)
		}
	}
	if after := sizes(t, cli, c); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the dry run changed sizes: %v, then %v", before, after)
	}

	load := etcdtest.StartLoad(t, cli)
	stop := watchShrink(t, cli, before)
	res, err = defrag.Run(ctx, cli, defrag.Options{CompactKeyspace: true, Pause: 300 * time.Millisecond})
	shrunk := stop()
	if err != nil {
		t.Fatal(err)
	}
	load.Check(t)
	if res.CompactedTo == 0 || len(res.Members) != 3 {
		t.Fatalf("result: %+v", res)
	}
	var prev time.Time
	for i, m := range res.Members {
		t.Logf("%s (leader %v): %d -> %d bytes in %s", m.Name, m.Leader, m.SizeBefore, m.SizeAfter, m.Took)
		if m.Leader != (i == 2) {
			t.Fatalf("member %d of the run is %s, leader=%v: the leader must go last", i, m.Name, m.Leader)
		}
		if m.Skipped != "" || m.Reclaimed < m.SizeBefore/2 {
			t.Fatalf("member %s reclaimed %d of %d bytes (skipped: %q)", m.Name, m.Reclaimed, m.SizeBefore, m.Skipped)
		}
		at, ok := shrunk[m.Endpoint]
		if !ok || at.Before(prev) {
			t.Fatalf("member %s shrank at %v, before the member defragmented ahead of it (%v)", m.Name, at, prev)
		}
		prev = at
	}

	// Now every database is small: a policy with a minimum size skips all.
	res, err = defrag.Run(ctx, cli, defrag.Options{Policy: defrag.Policy{MinDBSize: 4 << 20}, Pause: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Members {
		if !strings.Contains(m.Skipped, "below the minimum") || m.SizeAfter != m.SizeBefore {
			t.Fatalf("member %s of %d bytes was not skipped: %+v", m.Name, m.SizeBefore, m)
		}
	}
	t.Log(res.Members[0].Skipped)
}

// A member that does not answer stops the run before anything is done.
func TestDefragNeedsEveryMember(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{Members: 3, UnsafeNoFsync: true})
	cli := c.Client(t)
	c.Members[2].Stop()
	_, err := defrag.Run(context.Background(), cli, defrag.Options{StatusTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "not every member answers") {
		t.Fatalf("got %v, want a refusal", err)
	}
	t.Log(err)
}

// A cluster out of space: after deleting and compacting, the run
// defragments and disarms the NOSPACE alarm, and puts succeed again.
func TestDefragDisarmsNOSPACE(t *testing.T) {
	c := etcdtest.Start(t, etcdtest.Options{QuotaBackendBytes: 8 << 20, UnsafeNoFsync: true})
	cli := c.Client(t)
	ctx := context.Background()
	value := strings.Repeat("x", 64<<10)
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		_, err = cli.Put(ctx, fmt.Sprintf("/fill/%04d", i), value)
	}
	if err == nil || !strings.Contains(err.Error(), "database space exceeded") {
		t.Fatalf("the quota was never reached: %v", err)
	}
	if _, err := cli.Delete(ctx, "/fill/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	res, err := defrag.Run(ctx, cli, defrag.Options{CompactKeyspace: true, DisarmNOSPACE: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Disarmed) != 1 {
		t.Fatalf("disarmed %v, want the one member", res.Disarmed)
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alarms.Alarms {
		if a.Alarm == pb.AlarmType_NOSPACE {
			t.Fatalf("NOSPACE still armed: %v", alarms.Alarms)
		}
	}
	if _, err := cli.Put(ctx, "/after", "ok"); err != nil {
		t.Fatalf("put after the disarm: %v", err)
	}
}
