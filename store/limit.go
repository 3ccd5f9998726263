package store

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Limits caps the bytes per second a process moves to its stores
// (uploads) and from them (downloads), shared by every store Limited
// wraps with them: a sidecar's first and second site, a restore's reads,
// all under one cap, so a fleet of sidecars on one node or one bucket
// does not crowd its links when their fulls come due.
type Limits struct {
	up, down *pace
}

// NewLimits caps uploads and downloads at these many bytes a second (0:
// no cap that way).
func NewLimits(upload, download int64) *Limits {
	return &Limits{up: newPace(upload), down: newPace(download)}
}

// pace lets bytes through at a rate: each transfer of n bytes takes its
// turn after those before it, n/rate long, so the transfers it paces
// together move no more than the rate on average (a read may come at
// once; the one after it waits for both). Safe for concurrent use.
type pace struct {
	perByte time.Duration
	mu      sync.Mutex
	next    time.Time // when the next transfer may begin
}

// newPace paces at bytesPerSecond; nil when it is 0 or less (no pace).
func newPace(bytesPerSecond int64) *pace {
	if bytesPerSecond <= 0 {
		return nil
	}
	return &pace{perByte: time.Duration(float64(time.Second) / float64(bytesPerSecond))}
}

// burst is the most one read takes at once: a tenth of a second's worth
// would be finer, but reads of a few KiB each would then wait on every
// buffer.
const burst = 256 << 10

// wait waits for n bytes' turn, or until ctx ends.
func (p *pace) wait(ctx context.Context, n int) error {
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		// Idle time earns no credit: a cap is a cap from its first byte.
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(n) * p.perByte)
	p.mu.Unlock()
	if wait := time.Until(at); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Limited returns st with its uploads and downloads under l. A store on
// the local file system, and st when l caps nothing, are returned as they
// are; copies within a store (Copier) move no bytes through the process
// and are not capped.
func Limited(st Store, l *Limits) Store {
	if _, local := AsLocal(st); local || l == nil || (l.up == nil && l.down == nil) {
		return st
	}
	return &limited{s: st, l: l}
}

type limited struct {
	s Store
	l *Limits
}

// Unwrap makes it a view.
func (l *limited) Unwrap() Store { return l.s }

func (l *limited) String() string { return fmt.Sprint(l.s) }

func (l *limited) Put(ctx context.Context, key string, r io.Reader) error {
	if l.l.up == nil {
		return l.s.Put(ctx, key, r)
	}
	return l.s.Put(ctx, key, &paced{ctx: ctx, r: r, p: l.l.up})
}

func (l *limited) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := l.s.Get(ctx, key)
	if err != nil || l.l.down == nil {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&paced{ctx: ctx, r: rc, p: l.l.down}, rc}, nil
}

func (l *limited) List(ctx context.Context, prefix string) ([]Object, error) {
	return l.s.List(ctx, prefix)
}

func (l *limited) Delete(ctx context.Context, key string) error { return l.s.Delete(ctx, key) }

// paced reads r no faster than p lets through.
type paced struct {
	ctx context.Context
	r   io.Reader
	p   *pace
}

func (p *paced) Read(b []byte) (int, error) {
	n, err := p.r.Read(b[:min(len(b), burst)])
	if n > 0 {
		if werr := p.p.wait(p.ctx, n); werr != nil {
			return n, fmt.Errorf("bandwidth limit: %w", werr)
		}
	}
	return n, err
}
