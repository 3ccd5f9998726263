package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// ErrNoAnswer is a call Bounded gave up on: the store did not answer, or
// a transfer stood still, for longer than its bound.
var ErrNoAnswer = errors.New("the store did not answer in time")

// Bounded returns st with every call bounded by idleness rather than by
// a total time, which a large object would outgrow: a List or Delete
// fails when the store has not answered within idle, a Get when the
// object's first byte, or any next one, takes longer, and a Put when its
// source has not been read for that long (the upload stands still). The
// error wraps ErrNoAnswer and names the store and the object. A store on
// the local file system is returned as it is; so is st when idle <= 0.
func Bounded(st Store, idle time.Duration) Store {
	if _, local := AsLocal(st); local || idle <= 0 {
		return st
	}
	return &bounded{s: st, idle: idle}
}

type bounded struct {
	s    Store
	idle time.Duration
}

// Unwrap makes it a view.
func (b *bounded) Unwrap() Store { return b.s }

func (b *bounded) String() string { return fmt.Sprint(b.s) }

// watchdog cancels its context once idle passes without a kick.
type watchdog struct {
	t     *time.Timer
	idle  time.Duration
	fired atomic.Bool
}

func (b *bounded) watch(ctx context.Context) (context.Context, *watchdog, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchdog{idle: b.idle}
	w.t = time.AfterFunc(b.idle, func() {
		w.fired.Store(true)
		cancel()
	})
	return ctx, w, func() {
		w.t.Stop()
		cancel()
	}
}

func (w *watchdog) kick() { w.t.Reset(w.idle) }

// fail names a call the watchdog ended.
func (b *bounded) fail(op, key string, w *watchdog, err error) error {
	if err != nil && w.fired.Load() {
		return fmt.Errorf("store %s: %s %s: %w: nothing moved for %s (%w)", b.s, op, key, ErrNoAnswer, b.idle, err)
	}
	return err
}

func (b *bounded) List(ctx context.Context, prefix string) ([]Object, error) {
	ctx, w, stop := b.watch(ctx)
	defer stop()
	objs, err := b.s.List(ctx, prefix)
	return objs, b.fail("list", prefix, w, err)
}

func (b *bounded) Delete(ctx context.Context, key string) error {
	ctx, w, stop := b.watch(ctx)
	defer stop()
	return b.fail("delete", key, w, b.s.Delete(ctx, key))
}

func (b *bounded) Put(ctx context.Context, key string, r io.Reader) error {
	ctx, w, stop := b.watch(ctx)
	defer stop()
	return b.fail("put", key, w, b.s.Put(ctx, key, &kickReader{r: r, w: w}))
}

func (b *bounded) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	ctx, w, stop := b.watch(ctx)
	rc, err := b.s.Get(ctx, key)
	if err != nil {
		stop()
		return nil, b.fail("get", key, w, err)
	}
	w.kick()
	return &watchedBody{rc: rc, b: b, key: key, w: w, stop: stop}, nil
}

// kickReader is a Put's source: each read is progress.
type kickReader struct {
	r io.Reader
	w *watchdog
}

func (k *kickReader) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	k.w.kick()
	return n, err
}

// watchedBody is a Get's body: each byte read is progress.
type watchedBody struct {
	rc   io.ReadCloser
	b    *bounded
	key  string
	w    *watchdog
	stop context.CancelFunc
}

func (g *watchedBody) Read(p []byte) (int, error) {
	n, err := g.rc.Read(p)
	if n > 0 {
		g.w.kick()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = g.b.fail("get", g.key, g.w, err)
	}
	return n, err
}

func (g *watchedBody) Close() error {
	g.stop()
	return g.rc.Close()
}
