package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/klauspost/compress/gzip"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// The calibration's workload, the same as the independent measurement's:
// a full of 200,000 keys × 1 KiB (half random, half text, as fill writes
// them), then single-key puts of 256 B values over 20,000 other keys.
const (
	ebrFullKeys  = 200000
	ebrFullValue = 1 << 10
	ebrDeltaKeys = 20000
)

// ebrBench measures restores of a bucket that etcd-backup-restore wrote
// itself (its snapshot command: gzip full, gzip deltas, Local provider),
// with its own restore command beside ours, both as processes, the runs
// interleaved. It needs etcdbrctl built from etcd-backup-restore's source
// (-etcdbrctl): CI cannot fetch it, so this is the calibration of the
// restore benchmark's in-CI reference, run by hand.
func ebrBench(ctx context.Context, cfg config) ([]row, error) {
	if cfg.etcdbrctl == "" {
		return nil, errors.New("give -etcdbrctl: etcd-backup-restore's binary, built from its source (CGO_ENABLED=0 go build -mod vendor)")
	}
	ours, err := buildEtcdBackup(ctx, cfg.dir)
	if err != nil {
		return nil, err
	}
	_, etcdutl, err := etcdTools(ctx, cfg.dir)
	if err != nil {
		return nil, err
	}
	container := filepath.Join(cfg.dir, "ebr-store")
	head, err := ebrBucket(ctx, cfg, container)
	if err != nil {
		return nil, err
	}
	st, err := store.NewFile(container)
	if err != nil {
		return nil, err
	}
	cat, err := snapshot.List(ctx, st)
	if err != nil {
		return nil, err
	}
	chain, err := cat.Latest()
	if err != nil {
		return nil, err
	}
	if chain.LastRevision() != head {
		return nil, fmt.Errorf("etcd-backup-restore's chain ends at %d, the member at %d", chain.LastRevision(), head)
	}
	fmt.Fprintf(os.Stderr, "bench: etcd-backup-restore wrote a %d MiB full and %d deltas up to revision %d\n",
		chain.Full.Size>>20, len(chain.Deltas), head)

	fullOnly, err := isolateFull(cfg, st, chain.Full)
	if err != nil {
		return nil, err
	}
	var rows []row
	var ebrChain, oursChain time.Duration
	for _, c := range []struct {
		subject, op string
		container   string
		bytes       int64
	}{
		{"restore of etcd-backup-restore's bucket, full + chain", fmt.Sprintf("gzip full + %d revisions → data dir", head-chain.Full.LastRevision), container, chain.Full.Size},
		{"restore of etcd-backup-restore's bucket, full only", "gzip full → data dir", fullOnly, chain.Full.Size},
	} {
		var oursRSS, theirsRSS []int64
		var oursRSSAnon []int64
		dir := filepath.Join(cfg.dir, "ebr-restored")
		o, r, err := measure(cfg.runs, func() error {
			defer func() { _ = os.RemoveAll(dir) }()
			cmd := exec.CommandContext(ctx, ours, "--store", "file://"+c.container, "restore", "--data-dir", dir)
			out, rss, err := runWatchingMemory(cmd)
			if err != nil {
				return fmt.Errorf("etcd-backup restore: %w\n%s", err, out)
			}
			oursRSS, oursRSSAnon = append(oursRSS, rss.Peak), append(oursRSSAnon, rss.Anon)
			return nil
		}, func() error {
			defer func() { _ = os.RemoveAll(dir) }()
			cmd := exec.CommandContext(ctx, cfg.etcdbrctl, "restore", "--data-dir", dir, "--storage-provider", "Local",
				"--store-container", c.container, "--restoration-temp-snapshots-dir", dir+".tmp", "--snapstore-temp-directory", cfg.dir)
			cmd.Env = ebrEnv()
			out, rss, err := runWatchingMemory(cmd)
			_ = os.RemoveAll(dir + ".tmp")
			if err != nil {
				return fmt.Errorf("etcdbrctl restore: %w\n%s", err, out)
			}
			theirsRSS = append(theirsRSS, rss.Peak)
			return nil
		})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "bench: %s: etcdkit %v, etcdbrctl %v\n", c.subject, o, r)
		if c.container == container {
			ebrChain, oursChain = r, o
		}
		rows = append(rows, row{
			Subject: c.subject, Op: c.op, Bytes: c.bytes, Ours: o, Ref: r, Time: true,
			Reference: "etcdbrctl restore (etcd-backup-restore, built from source)",
			Note: fmt.Sprintf("both as processes; peak RSS %d MiB (%d MiB anonymous), etcdbrctl %d MiB",
				maxOf(oursRSS)>>20, maxOf(oursRSSAnon)>>20, maxOf(theirsRSS)>>20),
		})
	}

	floor, note, err := ebrFloor(ctx, cfg, st, chain)
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{
		Subject: "restore of etcd-backup-restore's bucket, against its floor", Op: rows[0].Op, Bytes: chain.Full.Size,
		Ours: oursChain, Reference: "floor: inflating its one gzip member on one core while the deltas decode on the other, then writing the database once",
		Ref: floor, Time: true, Note: note + fmt.Sprintf("; goal ≤ 1.2× (ratio ≥ 0.83); etcdbrctl restore %.2fs, %.1f× ours", ebrChain.Seconds(), ebrChain.Seconds()/oursChain.Seconds()),
	})

	r, err := fullAlone(ctx, cfg, etcdutl, st, chain.Full, func(storeDir, dataDir string) error {
		out, err := exec.CommandContext(ctx, ours, "--store", "file://"+storeDir, "restore", "--data-dir", dataDir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("etcd-backup restore: %w\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rows = append(rows, r)

	// The calibration of the restore benchmark's in-CI reference: an
	// embedded etcd applying the same chain one Txn per revision, scaled
	// to the chain, against etcd-backup-restore's whole restore of it.
	sample, took, err := embeddedReplay(ctx, cfg, st, chain.Full)
	if err != nil {
		return nil, err
	}
	revisions := head - chain.Full.LastRevision
	embedded := time.Duration(float64(revisions) / (float64(sample) / took.Seconds()) * float64(time.Second))
	rows = append(rows, row{
		Subject: "calibration of the in-CI reference", Op: fmt.Sprintf("%d revisions", revisions), Bytes: chain.Full.Size,
		Ours: embedded, Reference: "etcdbrctl restore, the row above", Ref: ebrChain, Time: true,
		Note: fmt.Sprintf("embedded etcd, one Txn per revision (%d-revision sample, scaled); the ratio is ebrCalibration", sample),
	})
	return rows, nil
}

// fullAlone measures the restore of a compressed full alone, from a store
// that holds only it (ours: store dir, data dir), against etcdutl
// snapshot restore of its database, decompressed, with etcd's trailer as
// etcdctl saves it.
func fullAlone(ctx context.Context, cfg config, etcdutl string, st store.Store, full snapshot.Snapshot, ours func(string, string) error) (row, error) {
	alone, err := isolateFull(cfg, st, full)
	if err != nil {
		return row{}, err
	}
	raw := filepath.Join(cfg.dir, "full-alone.db")
	if err := decompressFull(ctx, st, full, raw); err != nil {
		return row{}, err
	}
	dir := filepath.Join(cfg.dir, "full-alone-restored")
	// Each side takes about 2 s, so one slow pass (writeback left by the
	// work before) moves the ratio far: 0.75× became 0.46× in one -short
	// run. The median of three costs seconds.
	o, r, err := measure(max(cfg.runs, 3), func() error {
		defer func() { _ = os.RemoveAll(dir) }()
		return ours(alone, dir)
	}, func() error {
		defer func() { _ = os.RemoveAll(dir) }()
		out, err := exec.CommandContext(ctx, etcdutl, "snapshot", "restore", raw, "--data-dir", dir).CombinedOutput()
		if err != nil {
			return fmt.Errorf("etcdutl snapshot restore: %w\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		return row{}, err
	}
	info, err := os.Stat(raw)
	if err != nil {
		return row{}, err
	}
	return row{
		Subject: "restore, " + string(full.Compression) + " full alone", Op: "file:// → data dir", Bytes: info.Size(),
		Ours: o, Reference: "etcdutl snapshot restore of the decompressed file", Ref: r,
		Note: fmt.Sprintf("object %d MiB; goal ≥ 0.67× (at most 1.5 times etcdutl's time)", full.Size>>20),
	}, nil
}

// ebrBucket has etcd-backup-restore's snapshot command back a member up
// while the workload runs, and returns the member's last revision once
// the bucket holds it. A bucket from an earlier run is reused.
func ebrBucket(ctx context.Context, cfg config, container string) (int64, error) {
	st, err := store.NewFile(container)
	if err != nil {
		return 0, err
	}
	if cat, err := snapshot.List(ctx, st); err == nil {
		if chain, err := cat.Latest(); err == nil && chain.LastRevision()-chain.Full.LastRevision >= int64(cfg.revisions) {
			fmt.Fprintf(os.Stderr, "bench: reusing etcd-backup-restore's bucket in %s\n", container)
			return chain.LastRevision(), nil
		}
	}
	m, err := startMember(filepath.Join(cfg.dir, "etcd-ebr"))
	if err != nil {
		return 0, err
	}
	defer m.close()
	fmt.Fprintf(os.Stderr, "bench: writing %d keys of %d B ...\n", ebrFullKeys, ebrFullValue)
	if err := fillValues(ctx, m.cli, ebrFullKeys*ebrFullValue, ebrFullValue); err != nil {
		return 0, err
	}
	// Its defaults, but for a schedule that takes no second full and no
	// garbage collection during the run.
	cmd := exec.CommandContext(ctx, cfg.etcdbrctl, "snapshot", "--endpoints", m.endpoint,
		"--storage-provider", "Local", "--store-container", container, "--schedule", "0 0 1 1 *",
		"--compress-snapshots", "--compression-policy", "gzip", "--delta-snapshot-period", "20s",
		"--garbage-collection-period", "24h", "--snapstore-temp-directory", cfg.dir)
	logFile, err := os.Create(filepath.Join(cfg.dir, "etcdbrctl-snapshot.log"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = logFile.Close() }()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = ebrEnv()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	if _, err := waitForChain(ctx, st, 0, 2*time.Minute); err != nil {
		return 0, fmt.Errorf("etcdbrctl snapshot took no full (log: %s): %w", logFile.Name(), err)
	}
	fmt.Fprintf(os.Stderr, "bench: writing %d revisions of 256 B puts over %d keys ...\n", cfg.revisions, ebrDeltaKeys)
	if err := putRevisions(ctx, m.cli, cfg.revisions, ebrDeltaKeys); err != nil {
		return 0, err
	}
	resp, err := m.cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return waitForChain(ctx, st, resp.Header.Revision, 5*time.Minute)
}

// waitForChain waits until the store's latest chain reaches revision rev
// (a full, for 0) and returns its last revision.
func waitForChain(ctx context.Context, st store.Store, rev int64, limit time.Duration) (int64, error) {
	deadline := time.Now().Add(limit)
	for {
		if cat, err := snapshot.List(ctx, st); err == nil {
			if chain, err := cat.Latest(); err == nil && chain.LastRevision() >= rev {
				return chain.LastRevision(), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%v did not reach revision %d in %v", st, rev, limit)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// isolateFull returns a file store directory that holds only the full
// snapshot of st (a file store), linked.
func isolateFull(cfg config, st store.Store, full snapshot.Snapshot) (string, error) {
	alone := filepath.Join(cfg.dir, "full-alone")
	if err := os.MkdirAll(filepath.Dir(filepath.Join(alone, full.Key)), 0o750); err != nil {
		return "", err
	}
	err := os.Link(filepath.Join(storeDir(st), full.Key), filepath.Join(alone, full.Key))
	if err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	return alone, nil
}

// decompressFull writes a full snapshot's database to path with etcd's
// SHA-256 trailer, as etcdctl snapshot save writes it.
func decompressFull(ctx context.Context, st store.Store, full snapshot.Snapshot, path string) error {
	rc, err := snapshot.Open(ctx, st, full, snapshot.Codec{})
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), rc); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(h.Sum(nil)); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// buildEtcdBackup builds cmd/etcd-backup as a user runs it.
func buildEtcdBackup(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "bin", "etcd-backup")
	root, err := goOutput(ctx, ".", "list", "-m", "-f", "{{.Dir}}")
	if err != nil {
		return "", err
	}
	if _, err := goOutput(ctx, root, "build", "-o", bin, "./cmd/etcd-backup"); err != nil {
		return "", err
	}
	return bin, nil
}

// ebrEnv is the environment of etcdbrctl: its Local provider puts the
// container under $HOME, so HOME=/ lets it take an absolute path.
func ebrEnv() []string { return append(os.Environ(), "HOME=/") }

func maxOf(xs []int64) int64 {
	var m int64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// ebrFloor is the least a restore of etcd-backup-restore's chain can take
// on this machine: its full is one gzip member, which inflates on one core
// only, while the deltas decode on the other; then the database is
// written once (dd, fsync). Each part is timed from the page cache.
func ebrFloor(ctx context.Context, cfg config, st store.Store, chain snapshot.Chain) (time.Duration, string, error) {
	object := filepath.Join(storeDir(st), chain.Full.Key)
	if _, err := hashFile(object); err != nil {
		return 0, "", err
	}
	start := time.Now()
	f, err := os.Open(object)
	if err != nil {
		return 0, "", err
	}
	z, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err == nil {
		_, err = io.Copy(io.Discard, z)
	}
	_ = f.Close()
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w", object, err)
	}
	inflate := time.Since(start)
	start = time.Now()
	var events int
	for _, d := range chain.Deltas {
		dr, err := snapshot.OpenDelta(ctx, st, d, snapshot.Codec{})
		if err != nil {
			return 0, "", err
		}
		for {
			if _, err = dr.Next(); err != nil {
				break
			}
			events++
		}
		_ = dr.Close()
		if !errors.Is(err, io.EOF) {
			return 0, "", fmt.Errorf("%s: %w", d.Key, err)
		}
	}
	deltas := time.Since(start)
	raw := filepath.Join(cfg.dir, "ebr-floor.db")
	if err := decompressFull(ctx, st, chain.Full, raw); err != nil {
		return 0, "", err
	}
	defer func() { _ = os.Remove(raw) }()
	write, err := ddFloor(ctx, cfg, raw)
	if err != nil {
		return 0, "", err
	}
	return max(inflate, deltas) + write, fmt.Sprintf("floor: inflate %.2fs, %d events decoded %.2fs, write %.2fs", inflate.Seconds(), events, deltas.Seconds(), write.Seconds()), nil
}
