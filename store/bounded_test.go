package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// stalled answers nothing until the caller gives up, as a store behind
// a dead link does; its objects' bodies stop after their first byte.
type stalled struct {
	*Mem
	stall bool
}

func (s *stalled) List(ctx context.Context, prefix string) ([]Object, error) {
	if s.stall {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Mem.List(ctx, prefix)
}

func (s *stalled) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Mem.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(io.MultiReader(io.LimitReader(rc, 1), ctxBlock{ctx})), nil
}

type ctxBlock struct{ ctx context.Context }

func (b ctxBlock) Read([]byte) (int, error) { <-b.ctx.Done(); return 0, b.ctx.Err() }

func TestBounded(t *testing.T) {
	ctx := context.Background()
	inner := &stalled{Mem: NewMem()}
	if Bounded(inner, 0) != Store(inner) {
		t.Fatal("a zero bound wrapped the store")
	}
	st := Bounded(inner, 200*time.Millisecond)
	// Progress keeps a slow transfer alive past the bound.
	slow := &slowReader{r: bytes.NewReader(bytes.Repeat([]byte("x"), 10)), pause: 60 * time.Millisecond}
	if err := st.Put(ctx, "k", slow); err != nil {
		t.Fatalf("a slow but moving put: %v", err)
	}
	if _, err := st.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	inner.stall = true
	start := time.Now()
	_, err := st.List(ctx, "v2/")
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "list v2/") || time.Since(start) > 2*time.Second {
		t.Fatalf("a list with no answer: %v after %s", err, time.Since(start))
	}
	rc, err := st.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if _, err := io.ReadAll(rc); !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "get k") {
		t.Fatalf("a body that stops: %v", err)
	}
	// The caller's own cancellation is not the store's silence.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := st.List(cctx, ""); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoAnswer) {
		t.Fatalf("a cancelled list: %v", err)
	}
}

type slowReader struct {
	r     io.Reader
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.pause)
	return s.r.Read(p[:min(len(p), 1)])
}
