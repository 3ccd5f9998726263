package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
)

// windowRevisions is how many revisions up to a chain's end are compared
// event by event with the cluster's: enough to see a cluster that wrote
// the chain's keys again after a rollback and others beside them, few
// enough to watch in a moment.
const windowRevisions = 8

// eventsWait bounds the watch that reads the cluster's events: one that
// has not delivered them by then says nothing.
const eventsWait = 10 * time.Second

// compareEvents compares the chain's events of revisions (from, to] with
// the cluster's, read by a watch from revision from+1: a revision where one
// wrote a key the other did not, or other contents, is another past. A
// cluster whose history is compacted there, or a watch that does not
// deliver in time, says nothing (evidenceNone); no difference is
// evidenceSame.
func compareEvents(ctx context.Context, cli *clientv3.Client, chain []*snapshot.WatchEvent, from, to int64, own ownKeys) (evidence, string, error) {
	if to <= from {
		return evidenceSame, "", nil
	}
	wctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), eventsWait)
	defer cancel()
	wch := cli.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from+1), clientv3.WithCreatedNotify())
	// A progress notice says the watch delivered every event to its
	// revision; one asked before the watch caught up may go unanswered,
	// so it is asked again until the events are in.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var live []*snapshot.WatchEvent
	for done := false; !done; {
		select {
		case <-tick.C:
			_ = cli.RequestProgress(wctx)
			continue
		case resp, ok := <-wch:
			switch {
			case !ok || errors.Is(wctx.Err(), context.DeadlineExceeded):
				return evidenceNone, fmt.Sprintf("the cluster's events of revisions %d-%d did not arrive within %s", from+1, to, eventsWait), ctx.Err()
			case resp.CompactRevision > 0, errors.Is(resp.Err(), rpctypes.ErrCompacted):
				return evidenceNone, fmt.Sprintf("revision %d is compacted on the cluster", from+1), nil
			case resp.Err() != nil:
				return evidenceNone, fmt.Sprintf("the cluster's events: %v", resp.Err()), nil
			}
			for _, e := range resp.Events {
				if e.Kv.ModRevision > to {
					done = true
					break
				}
				if e := watchEvent(e); !own.of(e) {
					live = append(live, e)
				}
			}
			done = done || resp.IsProgressNotify() && resp.Header.Revision >= to
		}
	}
	chain = slices.DeleteFunc(slices.Clone(chain), own.of)
	want, got := byRevision(chain, from, to), byRevision(live, from, to)
	for rev := from + 1; rev <= to; rev++ {
		if !slices.Equal(want[rev], got[rev]) {
			return evidenceDiffers, fmt.Sprintf("at revision %d the chain wrote %v, the cluster %v", rev, want[rev], got[rev]), nil
		}
	}
	return evidenceSame, "", nil
}

// ownKeys: the keys compared with a datastore behind etcd's API leave out
// those it keeps for itself and shows unevenly through the API: kine's
// compaction record (a Get of compact_rev_key answers kube-apiserver's
// record, a range kine's own) and its fill rows (gap-<revision>, deleted,
// hidden from a live watch, replayed to one that catches up).
type ownKeys bool

func (o ownKeys) key(key []byte, deleted bool) bool {
	return bool(o) && (string(key) == "compact_rev_key" || deleted && bytes.HasPrefix(key, []byte("gap-")))
}

func (o ownKeys) of(e *snapshot.WatchEvent) bool { return o.key(e.Kv.Key, e.Type == snapshot.Delete) }

// byRevision names each event of revisions (from, to] by what it did, in
// a sorted list per revision.
func byRevision(events []*snapshot.WatchEvent, from, to int64) map[int64][]string {
	out := map[int64][]string{}
	for _, e := range events {
		rev := e.Kv.ModRevision
		if rev <= from || rev > to {
			continue
		}
		name := fmt.Sprintf("%s %q", e.Type, e.Kv.Key)
		if e.Type == snapshot.Put {
			// A datastore that keeps no versions (kine) answers 0; its
			// backups record 1.
			name += fmt.Sprintf(" (value crc32c %08x, version %d)", crc32.Checksum(e.Kv.Value, castagnoli), max(e.Kv.Version, 1))
		}
		out[rev] = append(out[rev], name)
	}
	for rev := range out {
		slices.Sort(out[rev])
	}
	return out
}
