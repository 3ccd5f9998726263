package xfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"
)

// ContextReader returns a reader of r that fails with ctx's error once ctx
// is done, so that a copy loop stops promptly on cancellation.
func ContextReader(ctx context.Context, r io.Reader) io.Reader {
	return &ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Backoff returns the pause before retry attempt n (1-based): exponential
// from 100ms, capped at 5s, with jitter so that parallel parts do not retry
// in lockstep.
func Backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n-1, 6)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

// RangeOpener opens the bytes [off, off+n) of one object.
type RangeOpener func(ctx context.Context, off, n int64) (io.ReadCloser, error)

// Ranged describes a parallel ranged download.
type Ranged struct {
	// Size of the object in bytes.
	Size int64
	// PartSize is the length of one range; Concurrency ranges are in flight
	// or buffered at most, so memory stays within Concurrency × PartSize.
	PartSize    int64
	Concurrency int
	// Open opens one range.
	Open RangeOpener
	// Retries is how often a range whose body breaks off is resumed; SDKs
	// retry failed requests but not a body that stops half-way.
	Retries int
	Logger  *slog.Logger
	// Name is the object's name in log lines.
	Name string
}

// Reader starts the download and returns the object's bytes in order. The
// caller closes it; closing early cancels the ranges in flight.
func (r Ranged) Reader(ctx context.Context) io.ReadCloser {
	ctx, cancel := context.WithCancel(ctx)
	pr := &parallelReader{
		cancel: cancel,
		queue:  make(chan *part, r.Concurrency),
		done:   make(chan struct{}),
	}
	pool := make(chan []byte, r.Concurrency)
	for range r.Concurrency {
		pool <- nil // allocated lazily: a small object never needs them all
	}
	pr.pool = pool
	go pr.produce(ctx, r)
	return pr
}

type part struct {
	buf   []byte
	err   error
	ready chan struct{}
}

type parallelReader struct {
	cancel context.CancelFunc
	queue  chan *part
	pool   chan []byte
	done   chan struct{}
	cur    *part
	off    int
	err    error
}

func (p *parallelReader) produce(ctx context.Context, r Ranged) {
	defer close(p.queue)
	for off := int64(0); off < r.Size; off += r.PartSize {
		var buf []byte
		select {
		case buf = <-p.pool:
		case <-ctx.Done():
			return
		}
		n := min(r.PartSize, r.Size-off)
		if int64(cap(buf)) < n {
			buf = make([]byte, r.PartSize)
		}
		pt := &part{buf: buf[:n], ready: make(chan struct{})}
		select {
		case p.queue <- pt:
		case <-ctx.Done():
			return
		}
		go func(off int64) {
			defer close(pt.ready)
			pt.err = r.fetch(ctx, off, pt.buf)
		}(off)
	}
}

// fetch fills buf with the range at off, resuming where a broken body
// stopped.
func (r Ranged) fetch(ctx context.Context, off int64, buf []byte) error {
	got := 0
	for attempt := 0; ; attempt++ {
		rc, err := r.Open(ctx, off+int64(got), int64(len(buf)-got))
		if err == nil {
			var n int
			n, err = io.ReadFull(rc, buf[got:])
			got += n
			_ = rc.Close()
			if err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt >= r.Retries || !Transient(err) {
			return fmt.Errorf("bytes %d-%d of %s: %w", off, off+int64(len(buf))-1, r.Name, err)
		}
		if r.Logger != nil {
			r.Logger.Warn("range read broke off, resuming", "object", r.Name, "offset", off+int64(got), "attempt", attempt+1, "err", err)
		}
		select {
		case <-time.After(Backoff(attempt + 1)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Transient reports whether a failure while reading a body is worth a
// retry: a short body or a broken connection, not a cancelled context.
func Transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return true
}

func (p *parallelReader) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	for p.cur == nil {
		pt, ok := <-p.queue
		if !ok {
			p.err = io.EOF
			return 0, io.EOF
		}
		<-pt.ready
		if pt.err != nil {
			p.err = pt.err
			p.cancel()
			return 0, pt.err
		}
		if len(pt.buf) == 0 {
			p.pool <- pt.buf
			continue
		}
		p.cur, p.off = pt, 0
	}
	n := copy(b, p.cur.buf[p.off:])
	p.off += n
	if p.off == len(p.cur.buf) {
		p.pool <- p.cur.buf
		p.cur = nil
	}
	return n, nil
}

func (p *parallelReader) Close() error {
	p.cancel()
	if p.err == nil {
		p.err = errors.New("read after close")
	}
	// Wait for the ranges in flight so that no goroutine outlives the
	// reader holding a connection.
	for pt := range p.queue {
		<-pt.ready
	}
	return nil
}
