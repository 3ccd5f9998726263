package snapshot

import (
	"bufio"
	"compress/lzw"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"filippo.io/age"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/etcdkit/etcdkit/internal/frames"
)

// Compression is the compression of a snapshot object, layered under the
// encryption: payload → compress → encrypt.
type Compression string

const (
	// None stores the payload as it is.
	None Compression = ""
	// Gzip is etcd-backup-restore's usual policy (.gz).
	Gzip Compression = "gzip"
	// Zstd compresses faster and smaller than gzip (.zst).
	Zstd Compression = "zstd"
	// Zlib (.zlib) is read for compatibility, never written.
	Zlib Compression = "zlib"
	// LZW (.Z, LSB order, literal width 8) is read for compatibility, never written.
	LZW Compression = "lzw"
)

var compressions = []Compression{Gzip, Zstd, Zlib, LZW}

// Suffix is the compression's part of an object's name: ".gz", "" for
// none.
func (c Compression) Suffix() string {
	switch c {
	case Gzip:
		return ".gz"
	case Zstd:
		return ".zst"
	case Zlib:
		return ".zlib"
	case LZW:
		return ".Z"
	}
	return ""
}

// ParseCompression accepts the names a user types: none, gzip, zstd (and
// the read-only zlib and lzw, which Codec.Check then refuses for writing).
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(strings.ToLower(s)); c {
	case "", "none":
		return None, nil
	case Gzip, Zstd, Zlib, LZW:
		return c, nil
	}
	return None, fmt.Errorf("compression %q: want none, gzip or zstd", s)
}

// Codec is how snapshot objects are encoded. The zero value writes plain
// objects and reads plain and compressed ones.
type Codec struct {
	// Compression of new snapshots: None, Gzip or Zstd.
	Compression Compression
	// Recipients encrypt new snapshots with age: X25519 public keys, or a
	// single scrypt (passphrase) recipient. None: snapshots are not encrypted.
	Recipients []age.Recipient
	// Identities decrypt encrypted snapshots; reading one without a
	// matching identity is an error.
	Identities []age.Identity
}

func (c Codec) encrypts() bool { return len(c.Recipients) > 0 }

// Check reports a codec that cannot write snapshots.
func (c Codec) Check() error {
	switch c.Compression {
	case None, Gzip, Zstd:
		return nil
	case Zlib, LZW:
		return fmt.Errorf("compression %s is read only, for etcd-backup-restore's old objects: write gzip or zstd", c.Compression)
	}
	return fmt.Errorf("compression %q: want none, gzip or zstd", c.Compression)
}

// encoding is how hard an encoder works for its speed.
type encoding int

const (
	// bulk is for full snapshots: every core compresses.
	bulk encoding = iota
	// lean is for deltas, which are written while events are buffered:
	// one core and a small window keep the encoder's memory off the budget
	// the events need.
	lean
)

// The compression levels, chosen by measurement on one core of the bench's
// machine (go run ./bench -only levels, bench/README.md). Fulls: gzip's
// fastest level compresses 1.43 times as fast as its default and writes
// 1 % more; zstd's default is both faster and smaller than its fastest
// there. Deltas are compressed on the member's cores all the time, so
// their speed counts most: gzip's fastest is 1.74 times its default for
// 1.2 points more size, zstd's fastest 1.59 times its default for 0.7.
const (
	bulkGzipLevel  = gzip.BestSpeed
	bulkZstdLevel  = zstd.SpeedDefault
	deltaGzipLevel = gzip.BestSpeed
	deltaZstdLevel = zstd.SpeedFastest
)

// encoder wraps dst so that what is written to it is compressed then
// encrypted. Close flushes both layers but leaves dst open.
func (c Codec) encoder(dst io.Writer, how encoding) (io.WriteCloser, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	var closers []io.Closer
	w := dst
	if c.encrypts() {
		enc, err := age.Encrypt(w, c.Recipients...)
		if err != nil {
			return nil, fmt.Errorf("encrypt: %w", err)
		}
		closers = append(closers, enc)
		w = enc
	}
	switch c.Compression {
	case Gzip:
		var gz io.WriteCloser
		if how == bulk {
			gz = newParallelBlocks(w, gzipBlocks(bulkGzipLevel))
		} else {
			var err error
			if gz, err = gzip.NewWriterLevel(w, deltaGzipLevel); err != nil {
				return nil, fmt.Errorf("gzip: %w", err)
			}
		}
		closers = append(closers, gz)
		w = gz
	case Zstd:
		if how == bulk {
			// One encoder, blocks of it on every core.
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(bulkZstdLevel), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
				zstd.WithWindowSize(compressBlock), zstd.WithLowerEncoderMem(true))
			if err != nil {
				return nil, fmt.Errorf("zstd: %w", err)
			}
			zw := newParallelBlocks(w, zstdBlocks(enc))
			closers = append(closers, closerFunc(enc.Close), zw)
			w = zw
			break
		}
		// One core and a small window keep a delta's encoder off the
		// memory its events need.
		zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(deltaZstdLevel), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(1<<20), zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		closers = append(closers, zw)
		w = zw
	}
	return &layered{Writer: w, closers: closers}, nil
}

// layered closes its layers innermost (last added) first, so each flushes
// into the one below it.
type layered struct {
	io.Writer
	closers []io.Closer
}

func (l *layered) Close() error {
	var errs []error
	for i := len(l.closers) - 1; i >= 0; i-- {
		errs = append(errs, l.closers[i].Close())
	}
	return errors.Join(errs...)
}

// decoder undoes what encoder did, as the snapshot's name says it was
// encoded.
func (c Codec) decoder(src io.Reader, s Snapshot) (io.ReadCloser, error) {
	// Decompressors read a byte at a time from a ByteReader, or put a
	// small buffer of their own (4 KiB: a system call each) over anything
	// else.
	var r io.Reader = bufio.NewReaderSize(src, 1<<20)
	if s.Compression == None && !s.Encrypted {
		r = src
	}
	if s.Encrypted {
		if len(c.Identities) == 0 {
			return nil, errors.New("it is encrypted (.age) and no identity was given to decrypt it")
		}
		dec, err := age.Decrypt(r, c.Identities...)
		if err != nil {
			return nil, fmt.Errorf("decrypt: %w", err)
		}
		r = dec
	}
	if s.Kind == KindFull && (s.Compression == Gzip || s.Compression == Zstd) {
		// A full's blocks are independent (parallelBlocks): they decode on
		// every core, ahead of the reader. The frames reader buffers src
		// itself.
		src := src
		if s.Encrypted {
			src = r
		}
		f := frames.Gzip
		if s.Compression == Zstd {
			f = frames.Zstd
		}
		fr, err := frames.NewReader(src, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Compression, err)
		}
		return fr, nil
	}
	switch s.Compression {
	case None:
		return io.NopCloser(r), nil
	case Gzip:
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return gz, nil
	case Zstd:
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return zr.IOReadCloser(), nil
	case Zlib:
		zr, err := zlib.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("zlib: %w", err)
		}
		return zr, nil
	case LZW:
		return lzw.NewReader(bufio.NewReader(r), lzw.LSB, 8), nil
	}
	return nil, fmt.Errorf("compression %q is unknown", s.Compression)
}
