package snapshot

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
)

// checksumSize is the length of the trailer behind every payload: etcd
// appends the SHA-256 of the database to its snapshot stream, and deltas
// carry the SHA-256 of their JSON the same way.
const checksumSize = sha256.Size

var (
	// ErrChecksum means the payload does not match its SHA-256 trailer.
	ErrChecksum = errors.New("SHA-256 trailer does not match the content (damaged object)")
	// ErrTruncated means the payload ended before its SHA-256 trailer.
	ErrTruncated = errors.New("shorter than its 32-byte SHA-256 trailer (truncated object)")
)

// verifier passes on a payload without its trailer and reports io.EOF only
// once the trailer matched: a reader of a damaged object always ends in an
// error, never in a clean EOF.
type verifier struct {
	r          io.Reader
	h          hash.Hash
	buf        []byte
	start, end int
	eof        bool
	err        error
	sum        []byte
}

func newVerifier(r io.Reader) *verifier {
	return &verifier{r: r, h: sha256.New(), buf: make([]byte, 64<<10+checksumSize)}
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	for {
		if avail := v.end - v.start - checksumSize; avail > 0 {
			n := copy(p, v.buf[v.start:v.start+avail])
			v.h.Write(p[:n])
			v.start += n
			return n, nil
		}
		if v.eof {
			v.err = v.finish()
			return 0, v.err
		}
		// Keep at most the trailer-sized tail; read behind it.
		copy(v.buf, v.buf[v.start:v.end])
		v.end -= v.start
		v.start = 0
		n, err := v.r.Read(v.buf[v.end:])
		v.end += n
		if errors.Is(err, io.EOF) {
			v.eof = true
		} else if err != nil {
			v.err = err
			return 0, err
		}
	}
}

func (v *verifier) finish() error {
	tail := v.buf[v.start:v.end]
	if len(tail) < checksumSize {
		return ErrTruncated
	}
	sum := v.h.Sum(nil)
	if !bytes.Equal(sum, tail) {
		return ErrChecksum
	}
	v.sum = sum
	return io.EOF
}

// Sum is the verified trailer, nil until the payload was read to its end.
func (v *verifier) Sum() []byte { return v.sum }

// named prefixes every error but io.EOF with the object it came from.
type named struct {
	io.ReadCloser
	name string
}

func (n *named) Read(p []byte) (int, error) {
	k, err := n.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("snapshot %s: %w", n.name, err)
	}
	return k, err
}

// closers reads from one layer and closes all of them, outermost first.
type closers struct {
	io.Reader
	closers []io.Closer
}

func (c *closers) Close() error {
	var errs []error
	for _, cl := range c.closers {
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}
