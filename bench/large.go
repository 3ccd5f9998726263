package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/compact"
	"github.com/etcdkit/etcdkit/history"
	"github.com/etcdkit/etcdkit/internal/frames"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// largeBench measures etcdkit where production is largest: a member filled
// with cfg.dbMiB of 8 KiB values (etcd-druid's default quota is 8 GiB), its
// full snapshots, then a zstd full and cfg.revisions revisions of deltas on
// top, restored, verified, validated and compacted. Every operation of ours
// runs in a child process, so its memory is its own, and each is set
// against its floor on this machine, measured in the same run: etcdctl
// snapshot save for a full; for a restore, writing the raw database once
// (dd with fsync) plus decompressing the full's blocks on every core.
func largeBench(ctx context.Context, cfg config) ([]row, error) {
	etcdctl, _, err := etcdTools(ctx, cfg.dir)
	if err != nil {
		return nil, err
	}
	memberDir := filepath.Join(cfg.dir, "etcd-large")
	m, err := startMember(memberDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if m != nil {
			m.close()
		}
	}()
	fmt.Fprintf(os.Stderr, "bench: writing %d MiB of 8 KiB values ...\n", cfg.dbMiB)
	if err := fill(ctx, m.cli, int64(cfg.dbMiB)<<20); err != nil {
		return nil, err
	}
	storeDir := filepath.Join(cfg.dir, "large-store")
	spool := filepath.Join(cfg.dir, "spool")
	for _, d := range []string{storeDir, spool} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	var rows []row
	r, _, err := fullRow(ctx, cfg, m, etcdctl, storeDir, spool, "gzip", false)
	if err != nil {
		return nil, err
	}
	rows = append(rows, r)
	// The zstd full stays: the chain is built on it.
	r, full, err := fullRow(ctx, cfg, m, etcdctl, storeDir, spool, "zstd", true)
	if err != nil {
		return nil, err
	}
	rows = append(rows, r)
	dbBytes := full.DBBytes

	// The floor of writing the database: a copy of etcdctl's file (the
	// database and its hash) from the page cache, with its fsync.
	rawDB := filepath.Join(cfg.dir, "etcdctl.db")
	write, err := ddFloor(ctx, cfg, rawDB)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(rawDB); err != nil {
		return nil, err
	}

	st, err := store.NewFile(storeDir)
	if err != nil {
		return nil, err
	}
	// A warm standby follows the chain from its full on, as it is
	// captured; once the member is gone it is promoted.
	sb, err := newStandby(filepath.Join(cfg.dir, "large-standby"))
	if err != nil {
		return nil, err
	}
	sb.follow(ctx, st)
	fmt.Fprintf(os.Stderr, "bench: writing %d revisions of 256 B puts ...\n", cfg.revisions)
	head, err := captureOnto(ctx, cfg.revisions, m, st, sb.landed)
	if err != nil {
		return nil, err
	}
	m.close()
	m = nil
	if err := os.RemoveAll(memberDir); err != nil {
		return nil, err
	}
	r2, err := sb.rows(ctx, cfg, st, head)
	if err != nil {
		return nil, err
	}
	rows = append(rows, r2...)

	decode, err := decodeFloor(filepath.Join(storeDir, full.Key), frames.Zstd)
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(cfg.dir, "large-restored")
	restored, restoreTook, err := restoreRuns(ctx, cfg, storeDir, dataDir)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{
		Subject: "restore, zstd full + chain", Op: fmt.Sprintf("zstd full + %d revisions → data dir", restored.Revisions), Bytes: dbBytes,
		Ours: restoreTook, Ref: write + decode, Time: true,
		Reference: "floor: writing the database once (dd, fsync) + decompressing the full on every core",
		Note: fmt.Sprintf("goal ≤ 1.3× (ratio ≥ 0.77); floor: write %.2fs + decompress %.2fs; download %.2fs, replay %.2fs; %v (goal: anonymous ≤ 256 MiB)",
			write.Seconds(), decode.Seconds(), restored.Download.Seconds(), restored.Replay.Seconds(), restored.Memory),
	})

	v, err := validateDir(ctx, cfg, dataDir, fmt.Sprintf("the restored %d MiB database", dbBytes>>20))
	if err != nil {
		return nil, err
	}
	rows = append(rows, v...)
	// What a compaction cannot avoid after its replay: a new zstd full of
	// the database, compressed, summed and stored.
	refull, err := fullFromFile(ctx, cfg, filepath.Join(dataDir, "member", "snap", "db"))
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, err
	}

	hr, err := historyRows(ctx, cfg, st, restored, restoreTook, dbBytes)
	if err != nil {
		return nil, err
	}
	rows = append(rows, hr...)

	// zstd, as etcd-backup compact writes a chain of zstd deltas.
	var c compactResult
	if err := runChild(ctx, &c, "compact", "-store", storeDir, "-compression", "zstd"); err != nil {
		return nil, err
	}
	return append(rows, row{
		Subject: "compaction", Op: fmt.Sprintf("zstd full + %d revisions → one zstd full", restored.Revisions), Bytes: dbBytes,
		Ours: c.Took, Ref: restoreTook * 3 / 2, Reference: "goal: 1.5 × the restore", Time: true,
		Note: fmt.Sprintf("%v (goal: anonymous ≤ 256 MiB); %d MiB in, %d MiB out; the restore %.2fs; a zstd full of the restored database from its file, alone: %.2fs",
			c.Memory, c.InputBytes>>20, c.OutputBytes>>20, restoreTook.Seconds(), refull.Seconds()),
	}), nil
}

// restoreRuns restores the chain into dataDir cfg.runs times, each in a
// child process after a sync: the last run's result and the median time.
func restoreRuns(ctx context.Context, cfg config, storeDir, dataDir string) (restoreResult, time.Duration, error) {
	var restored restoreResult
	var took []time.Duration
	for i := range cfg.runs {
		if i > 0 {
			if err := os.RemoveAll(dataDir); err != nil {
				return restoreResult{}, 0, err
			}
		}
		syscall.Sync()
		if err := runChild(ctx, &restored, "restore", "-store", storeDir, "-data-dir", dataDir); err != nil {
			return restoreResult{}, 0, err
		}
		took = append(took, restored.Took)
	}
	return restored, median(took), nil
}

// historyRows time verify, get and diff, each replaying the chain in a
// scratch directory, as a restore does, and reading some of it: all of it,
// one key, the deltas' keys at two revisions (one replay, since the chain
// holds both).
func historyRows(ctx context.Context, cfg config, st store.Store, restored restoreResult, restoreTook time.Duration, dbBytes int64) ([]row, error) {
	var rows []row
	half := restored.Revision - restored.Revisions/2
	part := history.StateOptions{WorkDir: cfg.dir, Keys: history.Keys{Key: "/chain/", Prefix: true}}
	reads := []struct {
		subject, op string
		run         func() (string, error)
	}{
		{"verify", "digest of every key", func() (string, error) {
			rep, err := history.Verify(ctx, st, history.VerifyOptions{WorkDir: cfg.dir})
			return rep.Digest.String(), err
		}},
		{"get", "one key", func() (string, error) {
			s, err := history.ReadState(ctx, st, history.StateOptions{WorkDir: cfg.dir, Keys: history.Keys{Key: "/chain/k00001"}})
			return fmt.Sprintf("%d key at revision %d", len(s.KVs), s.Revision), err
		}},
		{"diff", fmt.Sprintf("the deltas' keys, revision %d → the last", half), func() (string, error) {
			a, b, err := history.ReadStates(ctx, st, part, half)
			return fmt.Sprintf("%d of %d keys changed", len(history.Diff(a, b)), len(b.KVs)), err
		}},
	}
	for _, rd := range reads {
		var slowest time.Duration
		var said string
		for range cfg.runs {
			syscall.Sync()
			start := time.Now()
			var err error
			if said, err = rd.run(); err != nil {
				return nil, fmt.Errorf("%s: %w", rd.subject, err)
			}
			slowest = max(slowest, time.Since(start))
		}
		rows = append(rows, row{
			Subject: rd.subject, Op: fmt.Sprintf("zstd full + %d revisions, %s", restored.Revisions, rd.op), Bytes: dbBytes,
			Ours: slowest, Ref: restoreTook * 12 / 10, Reference: "goal: 1.2 × the restore", Time: true,
			Note: fmt.Sprintf("the slowest of %d runs (%s); the restore %.2fs", cfg.runs, said, restoreTook.Seconds()),
		})
	}

	return rows, nil
}

// captureOnto captures revisions revisions of 256 B puts over ebrDeltaKeys
// keys in zstd deltas, after the store's full, and returns the last
// revision stored. onResult, when set, hears of each snapshot.
func captureOnto(ctx context.Context, revisions int, m *embedded, st store.Store, onResult func(capture.Result)) (int64, error) {
	s, err := capture.New(m.cli, st, capture.Options{
		FullSchedule: "@every 24h", DeltaPeriod: deltaPeriod, RetentionPeriod: -1,
		Codec: snapshot.Codec{Compression: snapshot.Zstd}, OnResult: onResult,
	})
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	werr := putRevisions(ctx, m.cli, revisions, ebrDeltaKeys)
	if werr == nil {
		werr = caughtUp(ctx, m.cli, s)
	}
	stop()
	return s.Status().LastRevision, errors.Join(werr, <-done)
}

// fullFromFile times a zstd full of the database at db into a scratch
// file store, as a compaction writes its output.
func fullFromFile(ctx context.Context, cfg config, db string) (time.Duration, error) {
	dir := filepath.Join(cfg.dir, "large-refull")
	st, err := store.NewFile(dir)
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	syscall.Sync()
	start := time.Now()
	if _, err := snapshot.FullFromFile(ctx, st, db, snapshot.FullOptions{Codec: snapshot.Codec{Compression: snapshot.Zstd}}); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// ddFloor times dd copying path (read once into the page cache first) to a
// new file with its fsync: the least any restore of it writes.
func ddFloor(ctx context.Context, cfg config, path string) (time.Duration, error) {
	if _, err := hashFile(path); err != nil {
		return 0, err
	}
	copyPath := path + ".dd"
	var took []time.Duration
	for range cfg.runs {
		syscall.Sync()
		start := time.Now()
		out, err := exec.CommandContext(ctx, "dd", "if="+path, "of="+copyPath, "bs=1M", "conv=fsync").CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("dd: %w\n%s", err, out)
		}
		took = append(took, time.Since(start))
		if err := os.Remove(copyPath); err != nil {
			return 0, err
		}
	}
	return median(took), nil
}

// decodeFloor times decompressing a full's blocks on every core, from
// memory to nowhere: the least any decompressing restore spends on it.
func decodeFloor(path string, f frames.Format) (time.Duration, error) {
	obj, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = obj.Close() }()
	var blocks [][]byte
	if err := frames.Split(obj, f, func(b []byte) error {
		blocks = append(blocks, append([]byte(nil), b...))
		return nil
	}); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	workers := runtime.GOMAXPROCS(0)
	dec, err := frames.NewDecoder(f, workers)
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	var next int
	var mu sync.Mutex
	start := time.Now()
	err = parallel(workers, func(int) error {
		var out []byte
		for {
			mu.Lock()
			i := next
			next++
			mu.Unlock()
			if i >= len(blocks) {
				return nil
			}
			var err error
			if out, err = dec.Decode(blocks[i], out[:0]); err != nil {
				return err
			}
		}
	})
	return time.Since(start), err
}

type restoreResult struct {
	Took, Download, Replay time.Duration
	// Revision is the chain's last, Revisions those replayed from deltas.
	Revision, Revisions int64
	Memory              memory
}

// childRestore is the child process of a restore measurement: a restore
// as etcd-backup restore runs it.
func childRestore(ctx context.Context, args []string) (any, error) {
	var dataDir *string
	st, _, err := replayingChild("restore", args, func(fs *flag.FlagSet) { dataDir = fs.String("data-dir", "", "") })
	if err != nil {
		return nil, err
	}
	stop := watchSelf()
	start := time.Now()
	res, err := restore.Restore(ctx, st, restore.Options{Member: member.Spec{DataDir: *dataDir}})
	took := time.Since(start)
	m := stop()
	if err != nil {
		return nil, err
	}
	return restoreResult{Took: took, Download: res.Download, Replay: res.Replay, Revision: res.Revision, Revisions: res.Revisions, Memory: m}, nil
}

// replayingChild parses the flags of a child that replays a chain (-store
// and what more declares), opens its store and sets the memory limit
// etcd-backup restore and compact run under.
func replayingChild(name string, args []string, more func(*flag.FlagSet)) (store.Store, string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dir := fs.String("store", "", "")
	if more != nil {
		more(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	st, err := store.NewFile(*dir)
	if err != nil {
		return nil, "", err
	}
	debug.SetMemoryLimit(compact.ReplayMemory)
	return st, *dir, nil
}
