package snapshot

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/etcdkit/etcdkit/internal/frames"
)

// parallelBlocks compresses blocks of its input on every core, each block
// on its own, and writes them in order. For gzip each block is a gzip
// member: one standard multi-member gzip stream (RFC 1952), which every
// gzip reader reads whole, etcd-backup-restore's (Go's compress/gzip)
// among them. For zstd each block is a frame: a zstd stream is a sequence
// of frames (RFC 8878). A block costs a header and a fresh dictionary.
type parallelBlocks struct {
	dst      io.Writer
	compress func(dst *bytes.Buffer, block []byte) error
	block    []byte
	// order holds each block's result, in input order, for the writer
	// goroutine; at most workers blocks are in flight.
	order  chan chan result
	done   chan error
	blocks int
	closed bool
	failed atomic.Pointer[error]
	pool   sync.Pool
}

type result struct {
	buf *bytes.Buffer
	err error
}

// compressBlock is a block's size: at 1 MiB the blocks in flight hold
// a few MiB, and a block loses nothing to gzip's 32 KiB window and little
// to zstd's.
const compressBlock = 1 << 20

func newParallelBlocks(dst io.Writer, compress func(*bytes.Buffer, []byte) error) *parallelBlocks {
	workers := runtime.GOMAXPROCS(0)
	z := &parallelBlocks{dst: dst, compress: compress, order: make(chan chan result, workers), done: make(chan error, 1)}
	z.pool.New = func() any { return new(bytes.Buffer) }
	go z.writeOut()
	return z
}

// gzipBlocks compresses each block as a gzip member at level, its length
// in its header (internal/frames), so that a restore finds the next member
// without inflating this one and inflates them on every core.
func gzipBlocks(level int) func(*bytes.Buffer, []byte) error {
	return func(dst *bytes.Buffer, block []byte) error {
		w, err := gzip.NewWriterLevel(dst, level)
		if err != nil {
			return err
		}
		w.Extra = frames.GzipExtra()
		if _, err := w.Write(block); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		return frames.SetGzipLength(dst.Bytes())
	}
}

// zstdBlocks compresses each block as a zstd frame with enc, which
// EncodeAll lets every goroutine share.
func zstdBlocks(enc *zstd.Encoder) func(*bytes.Buffer, []byte) error {
	return func(dst *bytes.Buffer, block []byte) error {
		dst.Write(enc.EncodeAll(block, dst.AvailableBuffer()))
		return nil
	}
}

// writeOut writes the compressed blocks in order; after a failed write it
// drains the rest so no compressor blocks.
func (z *parallelBlocks) writeOut() {
	var err error
	for ch := range z.order {
		r := <-ch
		if err == nil {
			err = r.err
		}
		if err == nil {
			_, err = z.dst.Write(r.buf.Bytes())
		}
		if err != nil && z.failed.Load() == nil {
			z.failed.Store(&err)
		}
		r.buf.Reset()
		z.pool.Put(r.buf)
	}
	z.done <- err
}

func (z *parallelBlocks) Write(p []byte) (int, error) {
	if err := z.failed.Load(); err != nil {
		return 0, *err
	}
	if z.closed {
		return 0, errors.New("gzip: write after close")
	}
	n := len(p)
	for len(p) > 0 {
		if z.block == nil {
			z.block = make([]byte, 0, compressBlock)
		}
		take := min(len(p), compressBlock-len(z.block))
		z.block = append(z.block, p[:take]...)
		p = p[take:]
		if len(z.block) == compressBlock {
			z.flush()
		}
	}
	return n, nil
}

// flush hands the current block to a compressor goroutine.
func (z *parallelBlocks) flush() {
	block := z.block
	z.block = nil
	z.blocks++
	ch := make(chan result, 1)
	z.order <- ch
	go func() {
		buf := z.pool.Get().(*bytes.Buffer)
		ch <- result{buf: buf, err: z.compress(buf, block)}
	}()
}

// Close compresses what is left and waits for every block to be written.
// An empty input still makes one (empty) member, as a gzip writer does.
func (z *parallelBlocks) Close() error {
	if z.closed {
		return nil
	}
	z.closed = true
	if len(z.block) > 0 || z.blocks == 0 {
		z.flush()
	}
	close(z.order)
	return <-z.done
}
