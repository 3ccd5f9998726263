package restore_test

import (
	"bytes"
	"compress/gzip"
	"compress/lzw"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// ebrEvent is etcd-backup-restore's delta entry, as it declares it.
type ebrEvent struct {
	EtcdEvent *clientv3.Event `json:"etcdEvent"`
	Time      time.Time       `json:"time"`
}

func compress(kind string, b []byte) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch kind {
	case "gz":
		w = gzip.NewWriter(&buf)
	case "zlib":
		w = zlib.NewWriter(&buf)
	case "Z":
		w = lzw.NewWriter(&buf, lzw.LSB, 8)
	default:
		return b
	}
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func withSum(b []byte) []byte {
	sum := sha256.Sum256(b)
	return append(bytes.Clone(b), sum[:]...)
}

// TestRestoresEtcdBackupRestoreFixtures writes a member's history the way
// etcd-backup-restore does, in both layouts and every compression it
// used, with a first delta that overlaps the full and two deltas that
// overlap each other, and restores it exactly.
func TestRestoresEtcdBackupRestoreFixtures(t *testing.T) {
	ctx := context.Background()
	m := etcdtest.Start(t, etcdtest.Options{})
	cli := m.Client(t)
	if _, err := (etcdtest.Workload{Ops: 120, Seed: 21, TxnPercent: 20, DeletePercent: 10}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := io.ReadAll(rc)
	_ = rc.Close()
	dbPath := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(dbPath, full[:len(full)-sha256.Size], 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := snapshot.DatabaseRevision(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (etcdtest.Workload{Ops: 150, Seed: 22, TxnPercent: 20, DeletePercent: 15, LeasePercent: 10}).Run(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	head := res.LastRevision
	events := watchAll(t, cli, f-4, head)
	between := func(from, to int64) []ebrEvent {
		var out []ebrEvent
		for _, ev := range events {
			if r := ev.Kv.ModRevision; r >= from && r <= to {
				out = append(out, ebrEvent{EtcdEvent: ev, Time: time.Now().UTC()})
			}
		}
		return out
	}
	type part struct{ from, to int64 }
	deltas := []part{{f - 4, f + 20}, {f + 21, f + 60}, {f + 40, f + 80}, {f + 81, head}}

	for _, layout := range []string{"v2", "v1"} {
		for _, comp := range []string{"gz", "zlib", "Z", ""} {
			name := layout + "-" + comp
			t.Run(name, func(t *testing.T) {
				st, err := store.NewFile(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				dir := "v2/"
				if layout == "v1" {
					dir = "v1/Backup-1700000000/"
				}
				suffix := ""
				if comp != "" {
					suffix = "." + comp
				}
				put := func(key string, b []byte) {
					if err := st.Put(ctx, dir+key+suffix, bytes.NewReader(compress(comp, b))); err != nil {
						t.Fatal(err)
					}
				}
				put(fmt.Sprintf("Full-00000000-%08d-1700000000", f), full)
				for i, d := range deltas {
					js, err := json.Marshal(between(d.from, d.to))
					if err != nil {
						t.Fatal(err)
					}
					put(fmt.Sprintf("Incr-%08d-%08d-%d", d.from, d.to, 1700000100+i), withSum(js))
				}
				rep, err := history.Verify(ctx, st, history.VerifyOptions{})
				if err != nil {
					t.Fatal(err)
				}
				live, err := history.LiveDigest(ctx, cli, head)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Digest != live {
					t.Fatalf("restored %+v, live %+v", rep.Digest, live)
				}
				if layout == "v1" && comp == "gz" {
					// etcd-backup-restore records no lease TTLs: the lease
					// granted after the full gets the default TTL, or none.
					res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}})
					if err != nil {
						t.Fatal(err)
					}
					if res.GuessedLeases != 1 || res.GrantedLeases != 0 || res.DroppedLeases != 0 {
						t.Fatalf("leases granted with the default TTL %d, with a recorded one %d, dropped %d; want 1, 0, 0",
							res.GuessedLeases, res.GrantedLeases, res.DroppedLeases)
					}
					res, err = restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: filepath.Join(t.TempDir(), "data")}, Read: restore.ReadOptions{UnknownLeaseTTL: restore.NoLease}})
					if err != nil {
						t.Fatal(err)
					}
					if res.GuessedLeases != 0 || res.DroppedLeases == 0 {
						t.Fatalf("without a default TTL: %d leases guessed, %d puts without their lease", res.GuessedLeases, res.DroppedLeases)
					}
				}
			})
		}
	}
}

// watchAll returns every event from revision from to revision to.
func watchAll(t *testing.T, cli *clientv3.Client, from, to int64) []*clientv3.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*clientv3.Event
	for wr := range cli.Watch(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		out = append(out, wr.Events...)
		if n := len(out); n > 0 && out[n-1].Kv.ModRevision >= to {
			return out
		}
	}
	t.Fatal("watch ended early")
	return nil
}

// A delta whose events do not continue the database is refused, naming
// the delta and the revision.
func TestReplayRefusesADeltaThatDoesNotContinue(t *testing.T) {
	ctx := context.Background()
	m := etcdtest.Start(t, etcdtest.Options{})
	cli := m.Client(t)
	if _, err := (etcdtest.Workload{Ops: 20, Seed: 23}).Run(ctx, cli); err != nil {
		t.Fatal(err)
	}
	st, err := store.NewFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	full, err := capture.Full(ctx, cli, st, snapshot.FullOptions{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := full.LastRevision
	// Named as the next revisions, but its only event is two revisions on.
	ev := &clientv3.Event{Kv: &mvccpb.KeyValue{Key: []byte("/x"), Value: []byte("1"), ModRevision: f + 3, CreateRevision: f + 3, Version: 1}}
	js, _ := json.Marshal([]ebrEvent{{EtcdEvent: ev, Time: time.Now().UTC()}})
	key := fmt.Sprintf("v2/Incr-%08d-%08d-1900000000", f+1, f+3)
	if err := st.Put(ctx, key, bytes.NewReader(withSum(js))); err != nil {
		t.Fatal(err)
	}
	_, err = history.Verify(ctx, st, history.VerifyOptions{})
	want := fmt.Sprintf("delta %s: revision %d follows revision %d", key, f+3, f)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
}
