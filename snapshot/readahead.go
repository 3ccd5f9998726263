package snapshot

import (
	"io"
	"sync"
)

// readAhead reads its source in its own goroutine, a few chunks ahead of
// its reader. Under a compressed object it puts the decompression on one
// core and the trailer's SHA-256 and whatever the reader does with the
// bytes (a restore writes them into the data dir) on another, instead of
// one after the other.
type readAhead struct {
	full chan chunk
	free chan []byte
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	cur  chunk
	off  int
	err  error
}

type chunk struct {
	b   []byte
	err error
}

const (
	readAheadChunk  = 256 << 10
	readAheadChunks = 4
)

func newReadAhead(src io.Reader) *readAhead {
	r := &readAhead{full: make(chan chunk, readAheadChunks), free: make(chan []byte, readAheadChunks+1), stop: make(chan struct{})}
	for range readAheadChunks + 1 {
		r.free <- make([]byte, readAheadChunk)
	}
	r.wg.Go(func() {
		defer close(r.full)
		for {
			var buf []byte
			select {
			case buf = <-r.free:
			case <-r.stop:
				return
			}
			// Not io.ReadFull: a decoder's own io.ErrUnexpectedEOF (a
			// stream cut short) must not read as the end of a short chunk.
			n := 0
			var err error
			for n < len(buf) && err == nil {
				var k int
				k, err = src.Read(buf[n:])
				n += k
			}
			select {
			case r.full <- chunk{b: buf[:n], err: err}:
			case <-r.stop:
				return
			}
			if err != nil {
				return
			}
		}
	})
	return r
}

func (r *readAhead) Read(p []byte) (int, error) {
	for r.off == len(r.cur.b) {
		if r.err != nil {
			return 0, r.err
		}
		if r.cur.b != nil {
			r.free <- r.cur.b[:cap(r.cur.b)]
		}
		c, ok := <-r.full
		if !ok {
			r.err = io.ErrClosedPipe
			return 0, r.err
		}
		r.cur, r.off, r.err = c, 0, c.err
		if len(c.b) == 0 && c.err == nil {
			continue
		}
	}
	n := copy(p, r.cur.b[r.off:])
	r.off += n
	return n, nil
}

// halt asks the goroutine to stop; one blocked in a read of the source
// returns once the source's object is closed.
func (r *readAhead) halt() error {
	r.once.Do(func() { close(r.stop) })
	return nil
}

// wait waits for the goroutine: the source may be closed after it.
func (r *readAhead) wait() error {
	r.wg.Wait()
	return nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
