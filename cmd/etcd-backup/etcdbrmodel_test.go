package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// etcdbrPick is the chain etcd-backup-restore restores from a store, by its
// rule (miscellaneous.GetLatestFullSnapshotAndDeltaSnapList, debd95bd): every
// snapshot of the store sorted by last revision, ties by creation; from
// the end, the deltas up to the first full met, then sorted again. It
// knows no timelines.
func etcdbrPick(all []snapshot.Snapshot) (snapshot.Snapshot, []snapshot.Snapshot, error) {
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b snapshot.Snapshot) int {
		return cmp.Or(cmp.Compare(a.LastRevision, b.LastRevision), cmp.Compare(a.Created.Unix(), b.Created.Unix()))
	})
	var deltas []snapshot.Snapshot
	for i := len(sorted) - 1; i >= 0; i-- {
		if sorted[i].Kind == snapshot.KindFull {
			slices.Reverse(deltas)
			return sorted[i], deltas, nil
		}
		deltas = append(deltas, sorted[i])
	}
	return snapshot.Snapshot{}, nil, errors.New("no full snapshot")
}

// etcdbrReplay checks the deltas as etcd-backup-restore's restorer applies
// them (restorer.go, debd95bd): its embedded etcd starts at the full's
// revision; of the first delta only the events past it are applied (none
// when the delta ends there), of every later one all its events; each
// revision is one transaction, and after each delta the etcd's revision
// must be the delta's last ("mismatched event revision while applying
// delta snapshot").
func etcdbrReplay(ctx context.Context, st store.Store, full snapshot.Snapshot, deltas []snapshot.Snapshot) error {
	rev := full.LastRevision
	for i, d := range deltas {
		if i == 0 && d.LastRevision == rev {
			continue
		}
		r, err := snapshot.OpenDelta(ctx, st, d, snapshot.Codec{})
		if err != nil {
			return err
		}
		last := int64(0)
		for {
			ev, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = r.Close()
				return err
			}
			if i == 0 && ev.Revision() <= full.LastRevision {
				continue
			}
			if ev.Revision() != last {
				rev, last = rev+1, ev.Revision()
			}
		}
		_ = r.Close()
		if rev != d.LastRevision {
			return fmt.Errorf("snapshot revision verification failed for delta snapshot %s: mismatched event revision while applying delta snapshot, expected %d but applied %d",
				d.Key, d.LastRevision, rev)
		}
	}
	return nil
}

// checkEtcdBRRestores restores the store as etcd-backup-restore would
// (etcdbrPick, etcdbrReplay) and requires the live cluster's keys and
// revision: the state a bucket's every reader must restore.
func checkEtcdBRRestores(t *testing.T, storeURL string, live *clientv3.Client) {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	full, deltas, err := etcdbrPick(cat.All())
	if err != nil {
		t.Fatal(err)
	}
	if err := etcdbrReplay(ctx, st, full, deltas); err != nil {
		t.Fatalf("etcd-backup-restore's restore of %s fails: %v", storeURL, err)
	}
	chain := snapshot.Chain{Full: full, Deltas: deltas, Timeline: full.Timeline}
	got, err := history.ReadState(ctx, st, history.StateOptions{Read: restore.ReadOptions{Chain: &chain}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := live.Get(ctx, "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != resp.Header.Revision || len(got.KVs) != len(resp.Kvs) {
		t.Fatalf("etcd-backup-restore restores %s and %d deltas to revision %d with %d keys; the live cluster is at %d with %d",
			full.Key, len(deltas), got.Revision, len(got.KVs), resp.Header.Revision, len(resp.Kvs))
	}
	for i, kv := range resp.Kvs {
		if g := got.KVs[i]; string(g.Key) != string(kv.Key) || string(g.Value) != string(kv.Value) || g.ModRevision != kv.ModRevision {
			t.Fatalf("etcd-backup-restore restores %s=%s at %d; the live cluster holds %s=%s at %d", g.Key, g.Value, g.ModRevision, kv.Key, kv.Value, kv.ModRevision)
		}
	}
	t.Logf("etcd-backup-restore's rule restores %s and %d deltas (timeline %s) to revision %d, %d keys: the live cluster's", full.Key, len(deltas), full.Timeline, got.Revision, len(got.KVs))
}

// The model fails as etcd-backup-restore does on a store whose newest
// timeline restarted below the older one's revisions (a restore that kept
// its revision), and restores one whose timeline starts past them (a
// bumped restore).
func TestEtcdBRModel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	at := time.Unix(1_700_000_000, 0)
	write := func(st store.Store, kind snapshot.Kind, start, last int64, created time.Time) {
		t.Helper()
		if kind == snapshot.KindFull {
			// Never opened by the model: its name is what it picks by.
			key := fmt.Sprintf("v2/Full-00000000-%08d-%d", last, created.Unix())
			if err := st.Put(ctx, key, strings.NewReader("db")); err != nil {
				t.Fatal(err)
			}
			return
		}
		var events []snapshot.Event
		for r := start; r <= last; r++ {
			events = append(events, snapshot.Event{EtcdEvent: &snapshot.WatchEvent{Kv: &snapshot.KeyValue{Key: fmt.Appendf(nil, "/k/%d", r), ModRevision: r, Value: []byte("v")}}})
		}
		if _, err := snapshot.WriteDelta(ctx, st, snapshot.NewDelta(start, last, created, snapshot.Codec{}), snapshot.Codec{}, events, snapshot.Annotations{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		full  int64 // the newest timeline's full
		fails string
	}{
		{"kept revision", 5, "expected 10 but applied 17"},
		{"bumped revision", 1020, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := store.Open(ctx, "file://"+t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			// The old timeline: a full at 1, deltas to 20.
			write(st, snapshot.KindFull, 0, 1, at)
			write(st, snapshot.KindDelta, 2, 10, at.Add(time.Second))
			write(st, snapshot.KindDelta, 11, 20, at.Add(2*time.Second))
			// The restored cluster's: a full, three revisions after it.
			write(st, snapshot.KindFull, 0, c.full, at.Add(time.Minute))
			write(st, snapshot.KindDelta, c.full+1, c.full+3, at.Add(time.Minute+time.Second))
			cat, err := snapshot.List(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			full, deltas, err := etcdbrPick(cat.All())
			if err != nil {
				t.Fatal(err)
			}
			err = etcdbrReplay(ctx, st, full, deltas)
			switch {
			case c.fails == "" && (err != nil || full.LastRevision != c.full || len(deltas) != 1):
				t.Fatalf("picks %s and %d deltas: %v", full.Key, len(deltas), err)
			case c.fails != "" && (err == nil || !strings.Contains(err.Error(), c.fails)):
				t.Fatalf("picks %s and %v: %v, want the mismatch etcd-backup-restore reports (%s)", full.Key, deltas, err, c.fails)
			}
		})
	}
}
