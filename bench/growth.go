package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// growthPoint is one size the growth benchmark measured.
type growthPoint struct {
	DBMiB     int
	Revisions int
	DBBytes   int64
	Full      fullResult
	Restore   restoreResult
	Compact   compactResult
}

// growthBench measures a zstd full snapshot, the restore of the full and
// its chain, and the chain's compaction, each in a child for its memory,
// at databases of each size of cfg.growthDB (with the first number of
// revisions) and chains of each number of cfg.growthRevisions (on the
// first size), and draws time and peak anonymous memory against both
// (cfg.plot). Time must grow no faster than the work, memory not with the
// revisions.
func growthBench(ctx context.Context, cfg config) ([]row, error) {
	if cfg.growthFrom != "" {
		// Only draw what an earlier run measured.
		data, err := os.ReadFile(cfg.growthFrom)
		if err != nil {
			return nil, err
		}
		var points []growthPoint
		if err := json.Unmarshal(data, &points); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.growthFrom, err)
		}
		return growthRows(points), plotGrowth(cfg.plot, points)
	}
	var points []growthPoint
	seen := map[[2]int]bool{}
	var plan [][2]int
	for _, db := range cfg.growthDB {
		plan = append(plan, [2]int{db, cfg.growthRevisions[0]})
	}
	for _, revs := range cfg.growthRevisions {
		plan = append(plan, [2]int{cfg.growthDB[0], revs})
	}
	for _, p := range plan {
		if seen[p] {
			continue
		}
		seen[p] = true
		fmt.Fprintf(os.Stderr, "bench: growth: %d MiB, %d revisions ...\n", p[0], p[1])
		pt, err := measureGrowth(ctx, cfg, p[0], p[1])
		if err != nil {
			return nil, fmt.Errorf("%d MiB, %d revisions: %w", p[0], p[1], err)
		}
		points = append(points, pt)
	}
	if cfg.plot != "" {
		if err := writeGrowth(cfg.plot, points); err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "bench: growth plot written to %s, its points beside it (.json)\n", cfg.plot)
	}
	return growthRows(points), nil
}

// writeGrowth draws points into path and keeps them beside it, as JSON,
// for -growth-from.
func writeGrowth(path string, points []growthPoint) error {
	data, err := json.MarshalIndent(points, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(strings.TrimSuffix(path, filepath.Ext(path))+".json", append(data, '\n'), 0o644); err != nil {
		return err
	}
	return plotGrowth(path, points)
}

// growthRows sets each point against the first of its sweep.
func growthRows(points []growthPoint) []row {
	// Each point against the first, grown linearly with its sweep's work:
	// the database's bytes, or the revisions. A ratio of 1 or more grows
	// no faster than linearly.
	first := points[0]
	var rows []row
	for _, p := range points {
		scale, by := 1.0, "the first point"
		switch {
		case p.Revisions == first.Revisions && p.DBMiB != first.DBMiB:
			scale, by = float64(p.DBBytes)/float64(first.DBBytes), "the first point × the database's growth"
		case p.DBMiB == first.DBMiB && p.Revisions != first.Revisions:
			scale, by = float64(p.Revisions)/float64(first.Revisions), "the first point × the revisions' growth"
		}
		linear := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
		op := fmt.Sprintf("%d MiB db, %d revisions", p.DBBytes>>20, p.Revisions)
		rows = append(rows,
			row{Subject: "growth: full snapshot (zstd)", Op: op, Bytes: p.DBBytes, Ours: p.Full.Took, Ref: linear(first.Full.Took), Reference: by, Time: true,
				Note: fmt.Sprintf("peak RSS %d MiB", p.Full.PeakRSS>>20)},
			row{Subject: "growth: restore", Op: op, Bytes: p.DBBytes, Ours: p.Restore.Took, Ref: linear(first.Restore.Took), Reference: by, Time: true,
				Note: p.Restore.Memory.String()},
			row{Subject: "growth: compaction", Op: op, Bytes: p.DBBytes, Ours: p.Compact.Took, Ref: linear(first.Compact.Took), Reference: by, Time: true,
				Note: p.Compact.Memory.String()})
	}
	return rows
}

// measureGrowth fills a member with dbMiB of 8 KiB values, takes a zstd
// full in a child, captures revisions of 256 B puts onto it, and then
// restores and compacts the chain, each in a child.
func measureGrowth(ctx context.Context, cfg config, dbMiB, revisions int) (growthPoint, error) {
	p := growthPoint{DBMiB: dbMiB, Revisions: revisions}
	dir := filepath.Join(cfg.dir, fmt.Sprintf("growth-%d-%d", dbMiB, revisions))
	defer func() { _ = os.RemoveAll(dir) }()
	m, err := startMember(filepath.Join(dir, "etcd"))
	if err != nil {
		return p, err
	}
	defer func() {
		if m != nil {
			m.close()
		}
	}()
	if err := fill(ctx, m.cli, int64(dbMiB)<<20); err != nil {
		return p, err
	}
	storeDir := filepath.Join(dir, "store")
	if err := os.MkdirAll(storeDir, 0o750); err != nil {
		return p, err
	}
	syscall.Sync()
	if err := runChild(ctx, &p.Full, "full", "-endpoint", m.endpoint, "-store", storeDir, "-spool", dir, "-compression", "zstd"); err != nil {
		return p, err
	}
	p.DBBytes = p.Full.DBBytes
	st, err := store.NewFile(storeDir)
	if err != nil {
		return p, err
	}
	if _, err := captureOnto(ctx, revisions, m, st, nil); err != nil {
		return p, err
	}
	m.close()
	m = nil
	if err := os.RemoveAll(filepath.Join(dir, "etcd")); err != nil {
		return p, err
	}
	syscall.Sync()
	dataDir := filepath.Join(dir, "restored")
	if err := runChild(ctx, &p.Restore, "restore", "-store", storeDir, "-data-dir", dataDir); err != nil {
		return p, err
	}
	if err := os.RemoveAll(dataDir); err != nil {
		return p, err
	}
	syscall.Sync()
	err = runChild(ctx, &p.Compact, "compact", "-store", storeDir)
	return p, err
}

// parseSizes reads a comma-separated list of numbers with an optional k or
// M suffix (thousands, millions).
func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1000, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mult, f = 1000000, strings.TrimSuffix(f, "M")
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}
