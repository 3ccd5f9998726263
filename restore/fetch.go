package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// download is one object of a chain being fetched to a local file: the
// payload, decrypted and decompressed, its trailer verified on the way.
type download struct {
	snap snap.Snapshot
	path string
	done chan struct{}
	err  error
}

// wait blocks until the download ended.
func (d *download) wait(ctx context.Context) error {
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fetcher downloads a chain with bounded concurrency. Deltas are fetched
// at most ahead deltas in front of the replay, so the disk holds the full
// and a window of deltas, not the whole chain.
type fetcher struct {
	st    store.Store
	codec snap.Codec
	dir   string
	sem   chan struct{} // concurrent downloads
	ahead chan struct{} // deltas on disk not yet replayed
	bytes atomic.Int64
	wg    sync.WaitGroup
}

func newFetcher(st store.Store, codec snap.Codec, dir string, concurrency, ahead int) *fetcher {
	f := &fetcher{codec: codec, dir: dir, sem: make(chan struct{}, concurrency), ahead: make(chan struct{}, ahead)}
	f.st = counting{Store: st, n: &f.bytes}
	return f
}

// start fetches the full and the deltas in the background. Cancelling ctx
// stops it; wait for it with f.wg before removing the directory.
func (f *fetcher) start(ctx context.Context, chain snap.Chain) (full *download, deltas []*download) {
	full = f.fetch(ctx, chain.Full, fullFile)
	for i, d := range chain.Deltas {
		deltas = append(deltas, &download{snap: d, path: filepath.Join(f.dir, fmt.Sprintf("delta-%06d.json", i)), done: make(chan struct{})})
	}
	f.wg.Go(func() {
		for _, d := range deltas {
			select {
			case f.ahead <- struct{}{}:
			case <-ctx.Done():
				d.err = ctx.Err()
				close(d.done)
				continue
			}
			f.run(ctx, d)
		}
	})
	return full, deltas
}

func (f *fetcher) fetch(ctx context.Context, s snap.Snapshot, name string) *download {
	d := &download{snap: s, path: filepath.Join(f.dir, name), done: make(chan struct{})}
	f.run(ctx, d)
	return d
}

func (f *fetcher) run(ctx context.Context, d *download) {
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		d.err = ctx.Err()
		close(d.done)
		return
	}
	f.wg.Go(func() {
		defer func() { <-f.sem }()
		d.err = f.copy(ctx, d)
		close(d.done)
	})
}

func (f *fetcher) copy(ctx context.Context, d *download) (err error) {
	rc, err := snap.Open(ctx, f.st, d.snap, f.codec)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	out, err := os.Create(d.path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, rc); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// replayed frees the room of a delta that was applied.
func (f *fetcher) replayed(d *download) {
	_ = os.Remove(d.path)
	<-f.ahead
}

// counting counts the bytes read from the store: the progress of a
// download is in object bytes, which List knows in advance.
type counting struct {
	store.Store
	n *atomic.Int64
}

func (c counting) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := c.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: rc, n: c.n}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// errStopped ends decodeFile when its consumer wants no more events.
var errStopped = errors.New("decoding stopped")

// batch is a run of decoded events of one delta; end marks its last.
type batch struct {
	name   string
	events []snap.Event
	end    bool
	err    error
}

// decodeAhead decodes the deltas in order as they arrive, in batches of a
// few thousand events, a few batches ahead of the consumer, and frees each
// delta's file once decoded. The channel closes after the last delta, an
// error, or ctx's end; it never skips a batch and then sends a later one,
// so the consumer sees a prefix of the chain's events.
func decodeAhead(ctx context.Context, f *fetcher, deltas []*download) <-chan batch {
	const size, ahead = 4096, 4
	out := make(chan batch, ahead)
	send := func(b batch) bool {
		// select picks at random when both cases are ready; checking first
		// keeps a cancelled restore from sending after it has stopped.
		if ctx.Err() != nil {
			return false
		}
		select {
		case out <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	f.wg.Go(func() {
		defer close(out)
		for _, d := range deltas {
			if err := d.wait(ctx); err != nil {
				send(batch{name: d.snap.Key, err: err})
				return
			}
			err := decodeFile(d.path, d.snap.Key, size, func(events []snap.Event, end bool) bool {
				return send(batch{name: d.snap.Key, events: events, end: end})
			})
			f.replayed(d)
			if errors.Is(err, errStopped) {
				return
			}
			if err != nil {
				send(batch{name: d.snap.Key, err: err})
				return
			}
		}
	})
	return out
}

// decodeFile hands a delta payload's events to emit in batches of size;
// emit returns false to stop, and decodeFile then returns errStopped.
func decodeFile(path, name string, size int, emit func([]snap.Event, bool) bool) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	d := snap.NewDeltaReader(file, name)
	defer func() { _ = d.Close() }()
	events := make([]snap.Event, 0, size)
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			if !emit(events, true) {
				return errStopped
			}
			return nil
		}
		if err != nil {
			return err
		}
		events = append(events, ev)
		if len(events) == size {
			if !emit(events, false) {
				return errStopped
			}
			events = make([]snap.Event, 0, size)
		}
	}
}
