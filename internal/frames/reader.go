package frames

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Reader decodes a stream of blocks on every core and returns the decoded
// bytes in order. From the first block it cannot split on, it decodes the
// rest of the stream on one core, still ahead of its reader.
type Reader struct {
	format Format
	src    *bufio.Reader
	blocks *Decoder
	// order holds each block's result in stream order; its capacity
	// bounds the blocks in flight.
	order chan chan block
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// work is the blocks being decoded, which Close waits for before it
	// closes the decoder they share.
	work sync.WaitGroup
	cur  *[]byte
	off  int
	err  error
	// frames and outs recycle buffers of compressed and decoded blocks.
	frames, outs sync.Pool
}

type block struct {
	out *[]byte
	err error
}

// chunk is what the sequential decoder hands over at a time.
const chunk = 1 << 20

// NewReader starts decoding src, a stream of f. Close stops it; the caller
// closes src (which ends a read the decoder may be blocked in) first.
func NewReader(src io.Reader, f Format) (*Reader, error) {
	workers := runtime.GOMAXPROCS(0)
	r := &Reader{format: f, src: bufio.NewReaderSize(src, maxFrame+64<<10), order: make(chan chan block, 2*workers),
		stop: make(chan struct{}), done: make(chan struct{})}
	var err error
	if r.blocks, err = NewDecoder(f, workers); err != nil {
		return nil, err
	}
	r.frames.New = func() any { return new([]byte) }
	r.outs.New = func() any { b := make([]byte, 0, chunk); return &b }
	go r.split()
	return r, nil
}

// Split calls fn with each block of a stream of f, still compressed; a
// block it cannot find the end of without decoding is an error.
func Split(src io.Reader, f Format, fn func(block []byte) error) error {
	br := bufio.NewReaderSize(src, maxFrame+64<<10)
	var buf []byte
	for {
		b, err := next(f, br, buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
		buf = b
	}
}

// Decoder decodes single blocks that Split returned; its Decode may be
// called from many goroutines at once.
type Decoder struct {
	format Format
	zstd   *zstd.Decoder
}

// NewDecoder returns a Decoder of f's blocks for up to workers goroutines.
func NewDecoder(f Format, workers int) (*Decoder, error) {
	d := &Decoder{format: f}
	if f == Zstd {
		var err error
		// DecodeAll checks each frame's checksum and content size.
		if d.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(workers), zstd.WithDecoderMaxMemory(MaxBlock)); err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
	}
	return d, nil
}

// Decode appends block's decoded bytes to dst.
func (d *Decoder) Decode(block, dst []byte) ([]byte, error) {
	var out []byte
	var err error
	if d.format == Gzip {
		out, err = decodeGzip(block, dst)
	} else if out, err = d.zstd.DecodeAll(block, dst); err == nil && len(out)-len(dst) > MaxBlock {
		err = fmt.Errorf("zstd frame decodes to more than %d bytes", MaxBlock)
	}
	if err != nil {
		return nil, corrupt(err)
	}
	return out, nil
}

// Close releases the decoder; no Decode may run.
func (d *Decoder) Close() {
	if d.zstd != nil {
		d.zstd.Close()
	}
}

func next(f Format, r *bufio.Reader, buf []byte) ([]byte, error) {
	if f == Gzip {
		return gzipNext(r, buf)
	}
	return zstdNext(r, buf)
}

func (r *Reader) split() {
	defer close(r.done)
	defer close(r.order)
	for {
		fp := r.frames.Get().(*[]byte)
		frame, err := next(r.format, r.src, *fp)
		if errors.Is(err, io.EOF) {
			return
		}
		ch := make(chan block, 1)
		if errors.Is(err, errUnsized) {
			r.sequential()
			return
		}
		if err != nil {
			ch <- block{err: err}
			r.send(ch)
			return
		}
		if !r.send(ch) {
			return
		}
		*fp = frame
		r.work.Go(func() {
			out := r.outs.Get().(*[]byte)
			var err error
			*out, err = r.blocks.Decode(frame, (*out)[:0])
			r.frames.Put(fp)
			ch <- block{out: out, err: err}
		})
	}
}

// sequential decodes the rest of the stream on this goroutine.
func (r *Reader) sequential() {
	var dec io.ReadCloser
	var err error
	src := &sourceErr{r: r.src}
	if r.format == Zstd {
		var zr *zstd.Decoder
		if zr, err = zstd.NewReader(src, zstd.WithDecoderConcurrency(1)); err == nil {
			dec = zr.IOReadCloser()
		}
	} else {
		dec, err = gzip.NewReader(src)
	}
	if err != nil {
		ch := make(chan block, 1)
		ch <- block{err: src.classify(err)}
		r.send(ch)
		return
	}
	defer dec.Close()
	for {
		out := r.outs.Get().(*[]byte)
		// Not io.ReadFull: a decoder's own io.ErrUnexpectedEOF (a stream
		// cut short) must not read as the end of a short last chunk.
		n := 0
		for n < chunk && err == nil {
			var k int
			k, err = dec.Read((*out)[n:chunk])
			n += k
		}
		*out = (*out)[:n]
		if err != nil && !errors.Is(err, io.EOF) {
			err = src.classify(err)
		}
		ch := make(chan block, 1)
		ch <- block{out: out, err: err}
		if !r.send(ch) || err != nil {
			return
		}
	}
}

func (r *Reader) send(ch chan block) bool {
	select {
	case r.order <- ch:
		return true
	case <-r.stop:
		return false
	}
}

func (r *Reader) Read(p []byte) (int, error) {
	for r.cur == nil || r.off == len(*r.cur) {
		if r.err != nil {
			return 0, r.err
		}
		if r.cur != nil {
			r.outs.Put(r.cur)
			r.cur = nil
		}
		ch, ok := <-r.order
		if !ok {
			r.err = io.EOF
			continue
		}
		b := <-ch
		r.cur, r.off, r.err = b.out, 0, b.err
		if r.cur == nil {
			r.cur = new([]byte)
		}
	}
	n := copy(p, (*r.cur)[r.off:])
	r.off += n
	return n, nil
}

// Close stops the decoding and waits for its goroutines.
func (r *Reader) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	r.work.Wait()
	r.blocks.Close()
	return nil
}

// decodeGzip decodes one member, which must be whole and nothing more,
// and decode to at most MaxBlock bytes.
func decodeGzip(member, dst []byte) ([]byte, error) {
	isize := int(uint32(member[len(member)-4]) | uint32(member[len(member)-3])<<8 | uint32(member[len(member)-2])<<16 | uint32(member[len(member)-1])<<24)
	if isize > MaxBlock {
		return nil, fmt.Errorf("gzip member decodes to %d bytes, more than %d", isize, MaxBlock)
	}
	src := bytes.NewReader(member)
	z, err := gzip.NewReader(src)
	if err != nil {
		return nil, fmt.Errorf("gzip member: %w", err)
	}
	z.Multistream(false)
	dst = grow(dst, isize)
	if _, err := io.ReadFull(z, dst); err != nil {
		return nil, fmt.Errorf("gzip member: %w", unexpected(err))
	}
	// The end checks the member's CRC-32 and size.
	if n, err := z.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("longer than its trailer says")
		}
		return nil, fmt.Errorf("gzip member: %w", err)
	}
	if src.Len() != 0 {
		return nil, fmt.Errorf("gzip member: %d bytes after its trailer, inside the length its header gives", src.Len())
	}
	return dst, nil
}

// sourceErr remembers the error its source returned, so that a decoder's
// error that is not it is known for damage.
type sourceErr struct {
	r   io.Reader
	err error
}

func (s *sourceErr) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

func (s *sourceErr) classify(err error) error {
	if s.err != nil && errors.Is(err, s.err) {
		return err
	}
	return corrupt(err)
}
