package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// levelsBench is how the compression levels of full snapshots were chosen:
// each gzip and zstd level compresses a cfg.dbMiB database (half random,
// half text, as fill writes it) on one core, from memory, and reports its
// speed and the object's size. The reference is gzip's default level.
func levelsBench(ctx context.Context, cfg config) ([]row, error) {
	m, err := startMember(filepath.Join(cfg.dir, "etcd-levels"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: writing a %d MiB database ...\n", cfg.dbMiB)
	if err := fill(ctx, m.cli, int64(cfg.dbMiB)<<20); err != nil {
		m.close()
		return nil, err
	}
	st, err := store.NewFile(filepath.Join(cfg.dir, "levels-store"))
	if err != nil {
		m.close()
		return nil, err
	}
	full, err := snapshot.Full(ctx, m.cli, st, snapshot.FullOptions{SpoolDir: cfg.dir})
	m.close()
	if err != nil {
		return nil, err
	}
	db, err := os.ReadFile(filepath.Join(storeDir(st), full.Key))
	if err != nil {
		return nil, err
	}
	compress := func(w io.WriteCloser) (time.Duration, error) {
		start := time.Now()
		for i := 0; i < len(db); i += 1 << 20 {
			if _, err := w.Write(db[i:min(i+1<<20, len(db))]); err != nil {
				return 0, err
			}
		}
		return time.Since(start), w.Close()
	}
	type level struct {
		name string
		open func(io.Writer) (io.WriteCloser, error)
	}
	gz := func(l int) func(io.Writer) (io.WriteCloser, error) {
		return func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriterLevel(w, l) }
	}
	zs := func(l zstd.EncoderLevel) func(io.Writer) (io.WriteCloser, error) {
		return func(w io.Writer) (io.WriteCloser, error) {
			return zstd.NewWriter(w, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1))
		}
	}
	levels := []level{{"gzip 1 (BestSpeed)", gz(1)}, {"gzip 3", gz(3)}, {"gzip 6 (default)", gz(6)}, {"gzip 9", gz(9)},
		{"zstd fastest", zs(zstd.SpeedFastest)}, {"zstd default", zs(zstd.SpeedDefault)}, {"zstd better", zs(zstd.SpeedBetterCompression)}}
	measureLevel := func(l level) (time.Duration, int64, error) {
		var took []time.Duration
		var size int64
		for range cfg.runs {
			var n countingWriter
			w, err := l.open(&n)
			if err != nil {
				return 0, 0, err
			}
			d, err := compress(w)
			if err != nil {
				return 0, 0, err
			}
			took, size = append(took, d), int64(n)
		}
		return median(took), size, nil
	}
	ref, _, err := measureLevel(levels[2])
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, l := range levels {
		took, size, err := measureLevel(l)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{
			Subject: "compression level: " + l.name, Op: "one core, from memory", Bytes: int64(len(db)),
			Ours: took, Reference: "gzip 6 (default)", Ref: ref,
			Note: fmt.Sprintf("object %.1f %% of the database", float64(size)/float64(len(db))*100),
		})
	}
	return rows, nil
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
