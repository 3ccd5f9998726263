package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// levelsBench is how the compression levels were chosen: each gzip and
// zstd level compresses a cfg.dbMiB database (half random, half text, as
// fill writes it), then 32 MiB of deltas, on one core, from memory, and
// reports its speed and the object's size. The reference is gzip's
// default level.
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
	full, err := capture.Full(ctx, m.cli, st, snapshot.FullOptions{SpoolDir: cfg.dir})
	if err != nil {
		m.close()
		return nil, err
	}
	db, err := os.ReadFile(filepath.Join(storeDir(st), full.Key))
	if err != nil {
		m.close()
		return nil, err
	}
	// Deltas: 1 KiB values, half random and half text, in etcd-backup-
	// restore's JSON, as the capture writes them before compression.
	fmt.Fprintf(os.Stderr, "bench: writing 32 MiB of events for the deltas ...\n")
	err = fillValues(ctx, m.cli, 32<<20, 1<<10)
	var deltas []byte
	if err == nil {
		deltas, err = plainDeltas(ctx, m, st, full.LastRevision)
	}
	m.close()
	if err != nil {
		return nil, err
	}
	gz := func(l int) func(io.Writer) (io.WriteCloser, error) {
		return func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriterLevel(w, l) }
	}
	zs := func(l zstd.EncoderLevel, opts ...zstd.EOption) func(io.Writer) (io.WriteCloser, error) {
		return func(w io.Writer) (io.WriteCloser, error) {
			return zstd.NewWriter(w, append([]zstd.EOption{zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1)}, opts...)...)
		}
	}
	rows, err := levelRows(cfg, "full", db, []level{{"gzip 1 (BestSpeed)", gz(1)}, {"gzip 3", gz(3)}, {"gzip 6 (default)", gz(6)}, {"gzip 9", gz(9)},
		{"zstd fastest", zs(zstd.SpeedFastest)}, {"zstd default", zs(zstd.SpeedDefault)}, {"zstd better", zs(zstd.SpeedBetterCompression)}})
	if err != nil {
		return nil, err
	}
	// A delta's zstd encoder has a 1 MiB window and low memory (codec.go).
	lean := []zstd.EOption{zstd.WithWindowSize(1 << 20), zstd.WithLowerEncoderMem(true)}
	more, err := levelRows(cfg, "delta", deltas, []level{{"gzip 1 (BestSpeed)", gz(1)}, {"gzip 6 (default)", gz(6)},
		{"zstd fastest", zs(zstd.SpeedFastest, lean...)}, {"zstd default", zs(zstd.SpeedDefault, lean...)}})
	return append(rows, more...), err
}

// plainDeltas captures the events after revision since as uncompressed
// deltas and returns their bytes, one after the other.
func plainDeltas(ctx context.Context, m *embedded, st store.Store, since int64) ([]byte, error) {
	written, err := capture.Delta(ctx, m.cli, st, since, capture.DeltaOptions{})
	if err != nil {
		return nil, err
	}
	var all []byte
	for _, d := range written {
		data, err := os.ReadFile(filepath.Join(storeDir(st), d.Key))
		if err != nil {
			return nil, err
		}
		all = append(all, data...)
	}
	return all, nil
}

type level struct {
	name string
	open func(io.Writer) (io.WriteCloser, error)
}

// levelRows compresses data at each level on one core, from memory, in
// 1 MiB writes, against the second level given (gzip's default).
func levelRows(cfg config, what string, data []byte, levels []level) ([]row, error) {
	compress := func(w io.WriteCloser) (time.Duration, error) {
		start := time.Now()
		for i := 0; i < len(data); i += 1 << 20 {
			if _, err := w.Write(data[i:min(i+1<<20, len(data))]); err != nil {
				return 0, err
			}
		}
		return time.Since(start), w.Close()
	}
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
	ref := slices.IndexFunc(levels, func(l level) bool { return l.name == "gzip 6 (default)" })
	refTook, _, err := measureLevel(levels[ref])
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
			Subject: what + " compression level: " + l.name, Op: "one core, from memory", Bytes: int64(len(data)),
			Ours: took, Reference: "gzip 6 (default)", Ref: refTook,
			Note: fmt.Sprintf("object %.1f %% of the %s", float64(size)/float64(len(data))*100, what),
		})
	}
	return rows, nil
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
