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

	"github.com/etcdkit/etcdkit/internal/datadir"
	snap "github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// download is one object of a chain being fetched. The full snapshot's
// payload is decrypted, decompressed and verified on its way to path;
// a delta's object is copied as it is, compressed, into the spool (from),
// unless the store is on this machine, and decoded from there.
type download struct {
	snap snap.Snapshot
	path string
	from store.Store
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
// and a window of deltas, not the whole chain. Deltas stay compressed on
// the disk: decompressed, they would cost the disk as much as the
// database the replay writes.
type fetcher struct {
	st    store.Store
	codec snap.Codec
	// spool holds the downloaded deltas; nil when the store is a local
	// file store, whose objects are read where they are.
	spool store.Store
	sem   chan struct{} // concurrent downloads
	ahead chan struct{} // deltas on disk not yet replayed
	bytes atomic.Int64
	wg    sync.WaitGroup
}

func newFetcher(st store.Store, codec snap.Codec, dir string, concurrency, ahead int) (*fetcher, error) {
	f := &fetcher{codec: codec, sem: make(chan struct{}, concurrency), ahead: make(chan struct{}, ahead)}
	f.st = counting{Store: st, n: &f.bytes}
	if _, local := store.AsLocal(st); !local {
		spool, err := store.NewFile(filepath.Join(dir, "deltas"))
		if err != nil {
			return nil, err
		}
		f.spool = spool
	}
	return f, nil
}

// start fetches the full to db and the deltas in the background.
// Cancelling ctx stops it; wait for it with f.wg before removing the
// directory.
func (f *fetcher) start(ctx context.Context, chain snap.Chain, db string) (full *download, deltas []*download) {
	full = &download{snap: chain.Full, path: db, done: make(chan struct{})}
	f.run(ctx, full)
	return full, f.startDeltas(ctx, chain.Deltas)
}

// startDeltas fetches deltas in the background, at most ahead in front
// of the replay.
func (f *fetcher) startDeltas(ctx context.Context, snaps []snap.Snapshot) (deltas []*download) {
	for _, d := range snaps {
		deltas = append(deltas, &download{snap: d, from: f.spool, done: make(chan struct{})})
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
	return deltas
}

func (f *fetcher) run(ctx context.Context, d *download) {
	if d.snap.Kind == snap.KindDelta && f.spool == nil {
		d.from = f.st
		close(d.done)
		return
	}
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
	if d.snap.Kind == snap.KindDelta {
		obj, err := f.st.Get(ctx, d.snap.Key)
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", d.snap.Key, err)
		}
		defer func() { _ = obj.Close() }()
		return f.spool.Put(ctx, d.snap.Key, obj)
	}
	rc, err := snap.Open(ctx, f.st, d.snap, f.codec)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	out, err := os.Create(d.path)
	if err != nil {
		return err
	}
	if _, err := io.CopyBuffer(datadir.NewWritebackFile(out), rc, make([]byte, 1<<20)); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// replayed frees the room of a delta that was applied.
func (f *fetcher) replayed(ctx context.Context, d *download) {
	if f.spool != nil {
		_ = f.spool.Delete(ctx, d.snap.Key)
	}
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

// decodeAhead decodes the deltas in order as they arrive, in batches of
// at most batchEvents events and batchBytes of keys and values, up to
// decodedBatches batches ahead of the consumer, and frees each delta's
// room once decoded. The channel closes after the last delta, an error,
// or ctx's end; it never skips a batch and then sends a later one, so the
// consumer sees a prefix of the chain's events.
func decodeAhead(ctx context.Context, f *fetcher, deltas []*download) <-chan batch {
	out := make(chan batch, decodedBatches)
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
			err := f.decode(ctx, d, func(events []snap.Event, end bool) bool {
				return send(batch{name: d.snap.Key, events: events, end: end})
			})
			f.replayed(ctx, d)
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

// The decoded events waiting for the replay: up to 16k events and 16 MiB
// of keys and values. Decoding starts with the full snapshot's download,
// which keeps both cores busy itself, so a larger window buys no time
// (measured: the same restore time at 64 MiB) and costs a compaction its
// memory budget.
const (
	batchEvents    = 4096
	batchBytes     = 4 << 20
	decodedBatches = 4
)

// decode hands a delta's events to emit in batches; emit returns false
// to stop, and decode then returns errStopped.
func (f *fetcher) decode(ctx context.Context, from *download, emit func([]snap.Event, bool) bool) error {
	d, err := snap.OpenDelta(ctx, from.from, from.snap, f.codec)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	events := make([]snap.Event, 0, batchEvents)
	size := 0
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
		size += len(ev.EtcdEvent.Kv.Key) + len(ev.EtcdEvent.Kv.Value)
		if len(events) == batchEvents || size >= batchBytes {
			if !emit(events, false) {
				return errStopped
			}
			events, size = make([]snap.Event, 0, batchEvents), 0
		}
	}
}
