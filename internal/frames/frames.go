package frames

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Format is a compression whose stream is a sequence of independent blocks.
type Format int

const (
	// Gzip streams are multi-member gzip (RFC 1952).
	Gzip Format = iota + 1
	// Zstd streams are a sequence of frames (RFC 8878).
	Zstd
)

// MaxBlock bounds what one block may decode to. etcdkit's writers cut the
// stream into 1 MiB blocks; a block that claims more is not theirs and is
// decoded on one core, where memory does not grow with it.
const MaxBlock = 8 << 20

// maxFrame bounds the compressed bytes of one block that Split gathers
// before it gives up on it (a zstd frame's length is only known at its
// last block).
const maxFrame = MaxBlock + MaxBlock/8

// ErrCorrupt is a stream that does not decode: a block that fails its
// check or its format, or bytes after the last block. A failed read of the
// source is not one.
var ErrCorrupt = errors.New("damaged compressed stream")

func corrupt(err error) error {
	if errors.Is(err, ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorrupt, err)
}

// errUnsized says the next block's length cannot be known without
// decoding it; nothing of it was consumed but what the caller is handed
// back.
var errUnsized = errors.New("block of unknown size")

// The gzip extra subfield in which etcdkit's writer records a member's
// length: SI1 'E', SI2 'K', four bytes, little endian, the whole member
// from its first header byte to the end of its trailer. Readers that do not
// know it skip it (RFC 1952, 2.3.1.1).
var gzipSubfield = [2]byte{'E', 'K'}

// GzipExtra is the extra field a gzip member's header carries before its
// length is known; SetGzipLength fills the length in.
func GzipExtra() []byte { return []byte{gzipSubfield[0], gzipSubfield[1], 4, 0, 0, 0, 0, 0} }

// gzipLengthAt is where the length lies in a member written with
// GzipExtra and no other optional field: ten bytes of fixed header, XLEN,
// the subfield's id and length.
const gzipLengthAt = 10 + 2 + 4

// SetGzipLength records a whole member's length in it; member must have
// been written with GzipExtra as its header's only optional field.
func SetGzipLength(member []byte) error {
	if len(member) < gzipLengthAt+4 || member[3] != flagExtra || !bytes.Equal(member[12:14], gzipSubfield[:]) {
		return errors.New("gzip member without etcdkit's extra field")
	}
	binary.LittleEndian.PutUint32(member[gzipLengthAt:], uint32(len(member)))
	return nil
}

const flagExtra = 1 << 2

// gzipNext reads the next member whole when its header names its length.
func gzipNext(r *bufio.Reader, buf []byte) ([]byte, error) {
	h, err := r.Peek(12)
	if err != nil {
		if errors.Is(err, io.EOF) && len(h) == 0 {
			return nil, io.EOF
		}
		if errors.Is(err, io.EOF) {
			return nil, corrupt(fmt.Errorf("%d bytes after the last gzip member", len(h)))
		}
		return nil, err
	}
	if h[0] != 0x1f || h[1] != 0x8b || h[2] != 8 || h[3] != flagExtra {
		return nil, errUnsized
	}
	xlen := int(binary.LittleEndian.Uint16(h[10:]))
	h, err = r.Peek(12 + xlen)
	if err != nil {
		return nil, errUnsized
	}
	n := gzipLength(h[12:])
	// Header, the smallest deflate stream and the trailer.
	if n < 12+xlen+2+8 || n > maxFrame {
		return nil, errUnsized
	}
	// A length is believed only when it ends where the stream ends or the
	// next member begins, and its member's size fits a block: a length
	// damaged on its own leaves the stream whole, and the one-core decoder
	// reads it (CRC-32 and the trailer still check every byte).
	h, err = r.Peek(n + 3)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	if !gzipBelieved(h, n) {
		return nil, errUnsized
	}
	buf = grow(buf, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("gzip member of %d bytes: %w", n, unexpected(err))
	}
	return buf, nil
}

// gzipLength is the member length etcdkit's subfield of the extra field
// x records, 0 without one.
func gzipLength(x []byte) int {
	n := 0
	for len(x) >= 4 {
		l := int(binary.LittleEndian.Uint16(x[2:]))
		if len(x) < 4+l {
			break
		}
		if x[0] == gzipSubfield[0] && x[1] == gzipSubfield[1] && l == 4 {
			n = int(binary.LittleEndian.Uint32(x[4:]))
		}
		x = x[4+l:]
	}
	return n
}

// gzipBelieved says whether a member of length n ends where h, the
// stream from the member on, ends or a next member begins, and decodes
// to at most a block.
func gzipBelieved(h []byte, n int) bool {
	switch {
	case len(h) < n:
		return false // cut short: the decoder names it
	case len(h) > n && (len(h) < n+3 || h[n] != 0x1f || h[n+1] != 0x8b || h[n+2] != 8):
		return false
	}
	return binary.LittleEndian.Uint32(h[n-4:n]) <= MaxBlock
}

// zstdNext reads the next frame whole, walking its block headers.
// Skippable frames are passed over.
func zstdNext(r *bufio.Reader, buf []byte) ([]byte, error) {
	if err := skipSkippable(r); err != nil {
		return nil, err
	}
	h, err := r.Peek(5)
	if err != nil {
		return nil, errUnsized
	}
	fhd := h[4]
	single := fhd&(1<<5) != 0
	checksum := fhd&(1<<2) != 0
	fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
	if fhd>>6 == 0 && single {
		fcsLen = 1
	}
	hlen := 5 + [4]int{0, 1, 2, 4}[fhd&3] + fcsLen
	if !single {
		hlen++
	}
	h, err = r.Peek(hlen)
	if err != nil {
		return nil, errUnsized
	}
	var size uint64
	for i, b := range h[hlen-fcsLen:] {
		size |= uint64(b) << (8 * i)
	}
	if fcsLen == 2 {
		size += 256
	}
	if size > MaxBlock {
		return nil, errUnsized
	}
	// Peek the frame's block headers, one block at a time, without
	// consuming: a frame that turns out too long, or able to decode to
	// more than MaxBlock (a small encoder's frame declares no size), is
	// handed to the sequential decoder untouched.
	n, decoded := hlen, 0
	for {
		h, err := peekAt(r, n, 3)
		if err != nil {
			return nil, errUnsized
		}
		bh := uint32(h[0]) | uint32(h[1])<<8 | uint32(h[2])<<16
		last := bh&1 != 0
		size := int(bh >> 3)
		switch (bh >> 1) & 3 {
		case 0: // raw
			decoded += size
		case 1: // RLE: one byte, repeated size times
			decoded += size
			size = 1
		default: // compressed, to at most 128 KiB (RFC 8878, 3.1.1.2.4)
			decoded += 128 << 10
		}
		n += 3 + size
		if n > maxFrame || decoded > MaxBlock {
			return nil, errUnsized
		}
		if last {
			break
		}
	}
	if checksum {
		n += 4
	}
	buf = grow(buf, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("zstd frame of %d bytes: %w", n, unexpected(err))
	}
	return buf, nil
}

// skipSkippable passes over skippable frames up to a zstd frame's magic.
func skipSkippable(r *bufio.Reader) error {
	for {
		h, err := r.Peek(4)
		if err != nil {
			if errors.Is(err, io.EOF) && len(h) == 0 {
				return io.EOF
			}
			if errors.Is(err, io.EOF) {
				return corrupt(fmt.Errorf("%d bytes after the last zstd frame", len(h)))
			}
			return err
		}
		magic := binary.LittleEndian.Uint32(h)
		if magic&0xFFFFFFF0 != 0x184D2A50 {
			if magic != 0xFD2FB528 {
				return errUnsized
			}
			return nil
		}
		h, err = r.Peek(8)
		if err != nil {
			return errUnsized
		}
		if _, err := r.Discard(8 + int(binary.LittleEndian.Uint32(h[4:]))); err != nil {
			return fmt.Errorf("zstd skippable frame: %w", unexpected(err))
		}
	}
}

// peekAt peeks n bytes at off without consuming; the reader's buffer
// must hold off+n (NewReader sizes it for a whole block).
func peekAt(r *bufio.Reader, off, n int) ([]byte, error) {
	b, err := r.Peek(off + n)
	if err != nil {
		return nil, err
	}
	return b[off:], nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
