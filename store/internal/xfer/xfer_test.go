package xfer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

func data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// brokenBody returns the first half of a range, then a broken connection.
type brokenBody struct{ r io.Reader }

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}
func (b *brokenBody) Close() error { return nil }

func TestRangedDeliversInOrderAndResumes(t *testing.T) {
	src := data(10*1000 + 7)
	var opens, breaks atomic.Int32
	r := Ranged{
		Size: int64(len(src)), PartSize: 1000, Concurrency: 3, Retries: 2, Name: "obj",
		Open: func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
			opens.Add(1)
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // finish out of order
			part := src[off : off+n]
			if n == 1000 && off%3000 == 0 && breaks.Add(1) < 4 {
				return &brokenBody{r: bytes.NewReader(part[:n/2])}, nil
			}
			return io.NopCloser(bytes.NewReader(part)), nil
		},
	}.Reader(context.Background())
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("bytes differ from the source")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if opens.Load() <= 11 {
		t.Fatalf("%d opens: the broken ranges were not resumed", opens.Load())
	}
}

func TestRangedGivesUpAndReportsTheRange(t *testing.T) {
	boom := errors.New("boom")
	r := Ranged{
		Size: 5000, PartSize: 1000, Concurrency: 2, Retries: 1, Name: "obj",
		Open: func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
			if off == 2000 {
				return nil, boom
			}
			return io.NopCloser(bytes.NewReader(make([]byte, n))), nil
		},
	}.Reader(context.Background())
	n, err := io.Copy(io.Discard, r)
	if !errors.Is(err, boom) || n != 2000 {
		t.Fatalf("read %d bytes, err %v; want 2000 bytes then boom", n, err)
	}
	_ = r.Close()
}

func TestRangedCloseEarlyStopsFetching(t *testing.T) {
	var inFlight atomic.Int32
	r := Ranged{
		Size: 1 << 30, PartSize: 1 << 10, Concurrency: 4, Name: "big",
		Open: func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
			return io.NopCloser(bytes.NewReader(make([]byte, n))), nil
		},
	}.Reader(context.Background())
	buf := make([]byte, 4096)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	if n := inFlight.Load(); n != 0 {
		t.Fatalf("%d range requests still running after Close", n)
	}
	if _, err := r.Read(buf); err == nil {
		t.Fatal("read after close succeeded")
	}
}

func TestContextReaderStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := ContextReader(ctx, bytes.NewReader(make([]byte, 100)))
	if _, err := r.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
}
