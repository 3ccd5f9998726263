package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/compact"
	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// ebrCalibration is etcd-backup-restore's whole restore of its own bucket
// over the embedded-etcd estimate of the same chain, both measured in one
// run of go run ./bench -only ebr (bench/README.md; 2026-12-01: 156.8 s
// against 154.0 s): CI cannot build etcd-backup-restore, so the restore
// row's reference is the embedded estimate times this.
const ebrCalibration = 1.02

// restoreBench measures the restore engine on a chain captured from a
// member: a full of cfg.fullKeys keys of 1 KiB, then cfg.revisions
// revisions of 256 B puts over ebrDeltaKeys other keys. It reports the replay speed
// against replaying a sample through an embedded etcd one Txn per revision
// (etcd-backup-restore's way), a full-only restore of a cfg.dbMiB database
// against etcdutl snapshot restore, and the chain's compaction.
func restoreBench(ctx context.Context, cfg config) ([]row, error) {
	_, etcdutl, err := etcdTools(ctx, cfg.dir)
	if err != nil {
		return nil, err
	}
	standby, err := newStandby(filepath.Join(cfg.dir, "standby"))
	if err != nil {
		return nil, err
	}
	st, full, head, err := captureChain(ctx, cfg, standby)
	if err != nil {
		return nil, err
	}
	rows, err := standby.rows(ctx, cfg, st, head)
	if err != nil {
		return nil, err
	}

	// The whole restore: download, replay, data dir.
	var res restore.Result
	var took []time.Duration
	for i := range cfg.runs {
		dir := filepath.Join(cfg.dir, fmt.Sprintf("restored-%d", i))
		syscall.Sync()
		start := time.Now()
		if res, err = restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dir}}); err != nil {
			return nil, err
		}
		took = append(took, time.Since(start))
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	if res.Revision != head {
		return nil, fmt.Errorf("restored revision %d, head %d", res.Revision, head)
	}
	perSec := float64(res.Revisions) / res.Replay.Seconds()
	sample, embedded, err := embeddedReplay(ctx, cfg, st, full)
	if err != nil {
		return nil, err
	}
	embeddedPerSec := float64(sample) / embedded.Seconds()
	estimate := time.Duration(float64(res.Revisions) / embeddedPerSec * ebrCalibration * float64(time.Second))
	rows = append(rows, row{
		Subject: "restore, full + chain", Op: fmt.Sprintf("gzip full + %d revisions → data dir", res.Revisions), Bytes: res.Chain.Full.Size,
		Ours: median(took), Ref: estimate, Time: true,
		Reference: fmt.Sprintf("etcd-backup-restore, estimated: embedded etcd, one Txn per revision (%d-revision sample) × %.2f, the calibration", sample, ebrCalibration),
		Note: fmt.Sprintf("replay %.0f revisions/s (embedded etcd %.0f/s); download %.2fs, replay %.2fs",
			perSec, embeddedPerSec, res.Download.Seconds(), res.Replay.Seconds()),
	})
	r, err := fullAlone(ctx, cfg, etcdutl, st, full, func(storeDir, dataDir string) error {
		alone, err := store.NewFile(storeDir)
		if err == nil {
			_, err = restore.Restore(ctx, alone, restore.Options{Member: member.Spec{DataDir: dataDir}})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	rows = append(rows, r)

	// The chain compacted into one full, in a child for its peak RSS.
	var c compactResult
	if err := runChild(ctx, &c, "compact", "-store", storeDir(st)); err != nil {
		return nil, err
	}
	rows = append(rows, row{
		Subject: "compaction", Op: fmt.Sprintf("full + %d revisions → one full", res.Revisions), Bytes: c.InputBytes,
		Ours: c.Took, Reference: "goal", Ref: 21 * time.Second, Time: true,
		Note: fmt.Sprintf("%v (goal: anonymous ≤ 128 MiB, total ≤ 430 MiB); %d MiB in, %d MiB out", c.Memory, c.InputBytes>>20, c.OutputBytes>>20),
	})

	r, err = fullOnly(ctx, cfg, etcdutl)
	if err != nil {
		return nil, err
	}
	return append(rows, r), nil
}

// captureChain fills a member, takes a full and captures cfg.revisions
// revisions of deltas with a Snapshotter, which a standby follows.
func captureChain(ctx context.Context, cfg config, standby *standby) (store.Store, snapshot.Snapshot, int64, error) {
	m, err := startMember(filepath.Join(cfg.dir, "etcd-chain"))
	if err != nil {
		return nil, snapshot.Snapshot{}, 0, err
	}
	defer m.close()
	fmt.Fprintf(os.Stderr, "bench: writing %d keys of %d B ...\n", cfg.fullKeys, ebrFullValue)
	if err := fillValues(ctx, m.cli, int64(cfg.fullKeys)*ebrFullValue, ebrFullValue); err != nil {
		return nil, snapshot.Snapshot{}, 0, err
	}
	st, err := store.NewFile(filepath.Join(cfg.dir, "chain-store"))
	if err != nil {
		return nil, snapshot.Snapshot{}, 0, err
	}
	// gzip, etcd-backup-restore's policy, and its delta memory limit
	// (10 MiB): the chain has the shape of the calibration's (ebr.go).
	codec := snapshot.Codec{Compression: snapshot.Gzip}
	full, err := capture.Full(ctx, m.cli, st, snapshot.FullOptions{SpoolDir: cfg.dir, Codec: codec})
	if err != nil {
		return nil, snapshot.Snapshot{}, 0, err
	}
	s, err := capture.New(m.cli, st, capture.Options{
		FullSchedule: "@every 24h", DeltaPeriod: deltaPeriod, DeltaMemoryLimit: 10 << 20, RetentionPeriod: -1,
		Codec: codec, OnResult: standby.landed,
	})
	if err != nil {
		return nil, snapshot.Snapshot{}, 0, err
	}
	standby.follow(ctx, st)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	fmt.Fprintf(os.Stderr, "bench: writing %d revisions of 256 B puts ...\n", cfg.revisions)
	werr := putRevisions(ctx, m.cli, cfg.revisions, ebrDeltaKeys)
	if werr == nil {
		werr = caughtUp(ctx, m.cli, s)
	}
	stop()
	if err := errors.Join(werr, <-done); err != nil {
		return nil, snapshot.Snapshot{}, 0, err
	}
	return st, full, s.Status().LastRevision, nil
}

// deltaPeriod is the period of the chain's deltas; under the bench's load
// the memory limit writes most of them sooner.
const deltaPeriod = 10 * time.Second

// caughtUp waits until the Snapshotter stored the member's last revision:
// writers in the same process can outrun it on a small machine.
func caughtUp(ctx context.Context, cli *clientv3.Client, s *capture.Snapshotter) error {
	resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for s.Status().LastRevision < resp.Header.Revision {
		if time.Now().After(deadline) {
			return fmt.Errorf("the snapshotter reached revision %d of %d in 5 minutes", s.Status().LastRevision, resp.Header.Revision)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// putRevisions writes n revisions, one 256 B put each, over keys keys.
func putRevisions(ctx context.Context, cli *clientv3.Client, n, keys int) error {
	value := strings.Repeat("d", 256)
	var next atomic.Int64
	return parallel(32, func(int) error {
		for i := next.Add(1); i <= int64(n); i = next.Add(1) {
			if _, err := cli.Put(ctx, fmt.Sprintf("/chain/k%05d", i%int64(keys)), value); err != nil {
				return err
			}
		}
		return nil
	})
}

// embeddedReplay restores the full alone, starts an embedded etcd on it
// (fsync off, as etcd-backup-restore runs it) and applies the chain's first
// revisions one Txn per revision, as etcd-backup-restore does. It returns
// how many revisions it applied and how long they took.
func embeddedReplay(ctx context.Context, cfg config, st store.Store, full snapshot.Snapshot) (int, time.Duration, error) {
	const sample = 20000
	peer, client, err := etcdtest.FreeURLs()
	if err != nil {
		return 0, 0, err
	}
	dir := filepath.Join(cfg.dir, "embedded-replay")
	if _, err := restore.Restore(ctx, st, restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: full.LastRevision}}, Member: member.Spec{DataDir: dir, Name: "replay", PeerURLs: []string{peer.String()}}, KeepRevision: true}); err != nil {
		return 0, 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	m, err := startMemberAt(dir, "replay", peer, client)
	if err != nil {
		return 0, 0, err
	}
	defer m.close()

	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return 0, 0, err
	}
	chain, err := cat.Latest()
	if err != nil {
		return 0, 0, err
	}
	applied := 0
	var took time.Duration
	for _, d := range chain.Deltas {
		if applied >= sample {
			break
		}
		rd, err := snapshot.OpenDelta(ctx, st, d, snapshot.Codec{})
		if err != nil {
			return 0, 0, err
		}
		var events []snapshot.Event
		for {
			ev, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = rd.Close()
				return 0, 0, err
			}
			events = append(events, ev)
		}
		_ = rd.Close()
		start := time.Now()
		for i := 0; i < len(events) && applied < sample; {
			rev := events[i].Revision()
			var ops []clientv3.Op
			for ; i < len(events) && events[i].Revision() == rev; i++ {
				kv := events[i].EtcdEvent.Kv
				if events[i].EtcdEvent.Type == 1 {
					ops = append(ops, clientv3.OpDelete(string(kv.Key)))
				} else {
					ops = append(ops, clientv3.OpPut(string(kv.Key), string(kv.Value)))
				}
			}
			if _, err := m.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				return 0, 0, err
			}
			applied++
		}
		took += time.Since(start)
	}
	return applied, took, nil
}

// fullOnly restores a plain full snapshot of a cfg.dbMiB database from
// the file store against etcdutl snapshot restore of the same object.
func fullOnly(ctx context.Context, cfg config, etcdutl string) (row, error) {
	m, err := startMember(filepath.Join(cfg.dir, "etcd-fullonly"))
	if err != nil {
		return row{}, err
	}
	fmt.Fprintf(os.Stderr, "bench: writing a %d MiB database ...\n", cfg.dbMiB)
	if err := fill(ctx, m.cli, int64(cfg.dbMiB)<<20); err != nil {
		m.close()
		return row{}, err
	}
	st, err := store.NewFile(filepath.Join(cfg.dir, "fullonly-store"))
	if err != nil {
		m.close()
		return row{}, err
	}
	full, err := capture.Full(ctx, m.cli, st, snapshot.FullOptions{SpoolDir: cfg.dir})
	m.close()
	if err != nil {
		return row{}, err
	}
	object := filepath.Join(storeDir(st), full.Key)
	info, err := os.Stat(object)
	if err != nil {
		return row{}, err
	}
	ours := func() error {
		dir := filepath.Join(cfg.dir, "fullonly-ours")
		defer func() { _ = os.RemoveAll(dir) }()
		_, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: dir}})
		return err
	}
	ref := func() error {
		dir := filepath.Join(cfg.dir, "fullonly-etcdutl")
		defer func() { _ = os.RemoveAll(dir) }()
		out, err := exec.CommandContext(ctx, etcdutl, "snapshot", "restore", object, "--data-dir", dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("etcdutl snapshot restore: %w\n%s", err, out)
		}
		return nil
	}
	o, r, err := measure(cfg.runs, ours, ref)
	if err != nil {
		return row{}, err
	}
	return row{
		Subject: "restore, full only", Op: "file:// → data dir", Bytes: info.Size(),
		Ours: o, Reference: "etcdutl snapshot restore", Ref: r,
	}, nil
}

type compactResult struct {
	Took                    time.Duration
	InputBytes, OutputBytes int64
	Memory                  memory
}

// childCompact is the child process of the compaction measurement.
func childCompact(ctx context.Context, args []string) (any, error) {
	var comp *string
	st, dir, err := replayingChild("compact", args, func(fs *flag.FlagSet) { comp = fs.String("compression", "", "") })
	if err != nil {
		return nil, err
	}
	c0, err := snapshot.ParseCompression(*comp)
	if err != nil {
		return nil, err
	}
	stop := watchSelf()
	c, err := compact.Compact(ctx, st, compact.Options{WorkDir: filepath.Dir(dir),
		Full: snapshot.FullOptions{Codec: snapshot.Codec{Compression: c0}}})
	m := stop()
	if err != nil {
		return nil, err
	}
	return compactResult{Took: c.Took, InputBytes: c.InputBytes, OutputBytes: c.OutputBytes, Memory: m}, nil
}

func storeDir(st store.Store) string { return strings.TrimPrefix(fmt.Sprint(st), "file://") }
