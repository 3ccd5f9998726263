package frames

import (
	"bytes"
	stdgzip "compress/gzip"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// blk is the tests' block: larger than a zstd block (128 KiB), so that a
// frame's blocks are walked, and small enough for the race detector.
const blk = 256 << 10

// data is half random, half text, as a database of values is.
func data(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1, 2})
	for i := 0; i < n; i += 4096 {
		chunk := b[i:min(n, i+4096)]
		if i/4096%2 == 0 {
			_, _ = r.Read(chunk)
			continue
		}
		for j := range chunk {
			chunk[j] = "etcd keeps keys "[(i+j)%16]
		}
	}
	return b
}

func sizedGzip(t *testing.T, blocks [][]byte) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, b := range blocks {
		var m bytes.Buffer
		w, _ := gzip.NewWriterLevel(&m, gzip.BestSpeed)
		w.Extra = GzipExtra()
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := SetGzipLength(m.Bytes()); err != nil {
			t.Fatal(err)
		}
		out.Write(m.Bytes())
	}
	return out.Bytes()
}

func zstdFrames(t *testing.T, blocks [][]byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(blk))
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, b := range blocks {
		out = enc.EncodeAll(b, out)
	}
	return out
}

func cut(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > n {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

func readAll(t *testing.T, src []byte, f Format) ([]byte, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(src), f)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	return io.ReadAll(r)
}

func blocks(t *testing.T, src []byte, f Format) int {
	t.Helper()
	n := 0
	err := Split(bytes.NewReader(src), f, func([]byte) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Sized members and frames are found without decoding, decode in order,
// and the gzip stream stays one that Go's standard reader (etcd-backup-
// restore's) reads whole.
func TestBlocksDecodeInOrder(t *testing.T) {
	want := data(9*blk + 12345)
	for _, tc := range []struct {
		name string
		f    Format
		src  []byte
	}{
		{"gzip", Gzip, sizedGzip(t, cut(want, blk))},
		{"zstd", Zstd, zstdFrames(t, cut(want, blk))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := blocks(t, tc.src, tc.f); n != 10 {
				t.Fatalf("Split found %d blocks, want 10", n)
			}
			got, err := readAll(t, tc.src, tc.f)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("decoded %d bytes (err %v), want %d equal", len(got), err, len(want))
			}
			if tc.f == Gzip {
				z, err := stdgzip.NewReader(bytes.NewReader(tc.src))
				if err != nil {
					t.Fatal(err)
				}
				if got, err := io.ReadAll(z); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("compress/gzip read %d bytes (err %v)", len(got), err)
				}
			}
		})
	}
}

// A stream whose blocks do not say their size (one gzip member as
// etcd-backup-restore writes it, a zstd stream from a streaming encoder),
// or that stops saying it part way, is decoded whole on one core from
// there.
func TestUnsizedBlocksDecodeOnOneCore(t *testing.T) {
	want := data(5*blk + 7)
	var plain bytes.Buffer
	w := gzip.NewWriter(&plain)
	if _, err := w.Write(want[3*blk:]); err != nil || w.Close() != nil {
		t.Fatal("gzip", err)
	}
	var stream bytes.Buffer
	zw, _ := zstd.NewWriter(&stream)
	if _, err := zw.Write(want); err != nil || zw.Close() != nil {
		t.Fatal("zstd", err)
	}
	for _, tc := range []struct {
		name string
		f    Format
		src  []byte
	}{
		{"gzip, sized then not", Gzip, append(sizedGzip(t, cut(want[:3*blk], blk)), plain.Bytes()...)},
		{"zstd, one streamed frame", Zstd, stream.Bytes()},
		{"zstd, a skippable frame between", Zstd, append(append(zstdFrames(t, [][]byte{want[:blk]}), 0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'), zstdFrames(t, cut(want[blk:], blk))...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.src, tc.f)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("decoded %d bytes (err %v), want %d equal", len(got), err, len(want))
			}
		})
	}
}

// Damage never decodes to something shorter or different without an
// error: a wrong length, a flipped byte, a cut stream, garbage after it.
func TestDamagedBlocksFail(t *testing.T) {
	want := data(3 * blk)
	gz := sizedGzip(t, cut(want, blk))
	zs := zstdFrames(t, cut(want, blk))
	damage := func(src []byte, f func([]byte) []byte) []byte { return f(bytes.Clone(src)) }
	for _, tc := range []struct {
		name string
		f    Format
		src  []byte
	}{
		{"gzip one byte after", Gzip, append(bytes.Clone(gz), 0x1f)},
		{"zstd one byte after", Zstd, append(bytes.Clone(zs), 0x1f)},
		{"gzip byte flipped", Gzip, damage(gz, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b })},
		{"gzip cut", Gzip, gz[:len(gz)-100]},
		{"gzip garbage after", Gzip, append(bytes.Clone(gz), "garbage"...)},
		{"zstd byte flipped", Zstd, damage(zs, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b })},
		{"zstd cut", Zstd, zs[:len(zs)-100]},
		{"zstd garbage after", Zstd, append(bytes.Clone(zs), "garbage"...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.src, tc.f)
			if err == nil {
				t.Fatalf("decoded %d bytes without an error (equal: %v)", len(got), bytes.Equal(got, want))
			}
			// Damage is told from a failed read of the source: a restore
			// turns to another copy on it.
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%v is neither ErrCorrupt nor a cut stream", err)
			}
			t.Log(err)
		})
	}
}

// A length damaged on its own leaves a whole stream: it is not believed
// where it does not end at the next member, and the one-core decoder reads
// the stream, its CRC-32s checking every byte.
func TestWrongLengthsDecodeOnOneCore(t *testing.T) {
	want := data(3 * blk)
	gz := sizedGzip(t, cut(want, blk))
	for _, d := range []func([]byte){
		func(b []byte) { b[gzipLengthAt]-- },
		func(b []byte) { b[gzipLengthAt]++ },
		func(b []byte) { copy(b[gzipLengthAt:], []byte{0, 0, 0, 0}) },
		func(b []byte) { copy(b[gzipLengthAt:], []byte{0, 0xff, 0xff, 0x7f}) },
	} {
		src := bytes.Clone(gz)
		d(src)
		got, err := readAll(t, src, Gzip)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("decoded %d bytes (err %v), want %d equal", len(got), err, len(want))
		}
	}
}

// A stream cut inside the last member's trailer is damage, not a short end.
func TestCutTrailerFails(t *testing.T) {
	want := data(blk + 100)
	var one bytes.Buffer
	w := gzip.NewWriter(&one)
	if _, err := w.Write(want); err != nil || w.Close() != nil {
		t.Fatal("gzip", err)
	}
	got, err := readAll(t, one.Bytes()[:one.Len()-5], Gzip)
	if err == nil {
		t.Fatalf("a member without its trailer decoded %d bytes without an error", len(got))
	}
}

// Closing a reader that nobody drains stops its goroutine.
func TestCloseStops(t *testing.T) {
	src := sizedGzip(t, cut(data(20*blk), blk))
	r, err := NewReader(bytes.NewReader(src), Gzip)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	select {
	case <-r.done:
	default:
		t.Fatal("Close returned with the splitting goroutine running")
	}
}
