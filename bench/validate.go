package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcdkit/etcdkit/validate"
)

// validateBench validates stopped members' data dirs in both modes,
// against one sequential read of the same files (what `cat > /dev/null`
// does), both with the files in the page cache. Two datasets: cfg.dbMiB of
// 8 KiB values, mostly overflow runs, and a quarter of that in 256-byte
// values, mostly leaf pages, which the page walk reads all of.
func validateBench(ctx context.Context, cfg config) ([]row, error) {
	var rows []row
	for _, ds := range []struct {
		name      string
		mib       int
		valueSize int
	}{
		{"8 KiB values", cfg.dbMiB, 8 << 10},
		{"256 B values", max(1, cfg.dbMiB/4), 256},
	} {
		dir := filepath.Join(cfg.dir, fmt.Sprintf("etcd-validate-%d", ds.valueSize))
		m, err := startMember(dir)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "bench: writing %d MiB of %s ...\n", ds.mib, ds.name)
		err = fillValues(ctx, m.cli, int64(ds.mib)<<20, ds.valueSize)
		m.close()
		if err != nil {
			return nil, err
		}
		r, err := validateDir(ctx, cfg, dir, ds.name)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

func validateDir(ctx context.Context, cfg config, dir, dataset string) ([]row, error) {
	var files []string
	var total int64
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			files = append(files, path)
			total += info.Size()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	readAll := func() error {
		for _, path := range files {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, f)
			_ = f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	var rows []row
	for _, mode := range []validate.Mode{validate.Sanity, validate.Full} {
		var verdict validate.Verdict
		ours := func() error {
			r, err := validate.DataDir(ctx, dir, validate.Options{Mode: mode})
			verdict = r.Verdict
			return err
		}
		o, r, err := measure(cfg.runs, ours, readAll)
		if err != nil {
			return nil, err
		}
		if verdict != validate.Valid {
			return nil, fmt.Errorf("the benchmark's data dir %s validates %s", dir, verdict)
		}
		note := "goal: full ≤ 2× the read"
		if mode == validate.Sanity {
			note = fmt.Sprintf("goal: sanity ≤ 1 s (%.2fs)", o.Seconds())
		}
		rows = append(rows, row{
			Subject: fmt.Sprintf("validate (%s, %s)", mode, dataset), Op: "data dir", Bytes: total,
			Ours: o, Reference: "sequential read of the same files", Ref: r, Note: note,
		})
	}
	return rows, nil
}
