package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcdkit/etcdkit/validate"
)

// validateBench validates a stopped member's data dir of about cfg.dbMiB
// in both modes, against one sequential read of the same files (what
// `cat > /dev/null` does), both with the files in the page cache.
func validateBench(ctx context.Context, cfg config) ([]row, error) {
	dir := filepath.Join(cfg.dir, "etcd-validate")
	m, err := startMember(dir)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: writing a %d MiB database ...\n", cfg.dbMiB)
	err = fill(ctx, m.cli, int64(cfg.dbMiB)<<20)
	m.close()
	if err != nil {
		return nil, err
	}
	var total int64
	err = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	readAll := func() error {
		return filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			_, err = io.Copy(io.Discard, f)
			return err
		})
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
			return nil, fmt.Errorf("the benchmark's data dir validates %s", verdict)
		}
		note := "goal: full ≤ 2× the read"
		if mode == validate.Sanity {
			note = fmt.Sprintf("goal: sanity ≤ 1 s (%.2fs)", o.Seconds())
		}
		rows = append(rows, row{
			Subject: "validate (" + string(mode) + ")", Op: "data dir", Bytes: total,
			Ours: o, Reference: "sequential read of the same files", Ref: r, Note: note,
		})
	}
	return rows, nil
}
