package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// Harness tells the suite how to reach one backend.
type Harness struct {
	// Open returns a store rooted at prefix inside the harness's bucket.
	// Stores opened with the same prefix see the same objects.
	Open func(t *testing.T, prefix string) store.Store
	// Options are the options the stores of Open use; the suite sizes its
	// memory and cancellation bounds from PartSize and Concurrency.
	Options store.Options
	// Wire is the Transport of the stores Open returns, for backends that
	// speak HTTP; nil for file and mem.
	Wire *Wire
	// BadCredentials opens the harness's bucket with credentials the server
	// refuses; it returns the store, or the error when opening already
	// failed. nil for backends without credentials.
	BadCredentials func(t *testing.T) (store.Store, error)
	// MissingBucket opens a bucket that does not exist, like BadCredentials.
	MissingBucket func(t *testing.T) (store.Store, error)
	// PendingUploads counts the unfinished multipart uploads under prefix,
	// for backends where an aborted upload would otherwise linger (S3).
	PendingUploads func(t *testing.T, prefix string) int
	// HoldsObjects is set for a backend that keeps whole objects in process
	// memory (mem://); the bounded-memory test is skipped for it.
	HoldsObjects bool
	// LargeSize is the size of the large round trip; 0 means 64 MiB + 123.
	LargeSize int64
	// RacingWritersBothWin says why two writers of one key at the same
	// moment may both succeed on this backend (a server without an atomic
	// create); the races are then run and logged, not asserted. Writes of
	// a key that holds an object are refused all the same.
	RacingWritersBothWin string
}

// Run runs the conformance suite against the backend of h. Subtests run one
// after another, each under its own prefix.
func Run(t *testing.T, h Harness) {
	h.Options = h.Options.WithDefaults()
	if h.LargeSize == 0 {
		h.LargeSize = 64<<20 + 123
	}
	s := &suite{h: h}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"RoundTripEmpty", s.roundTripEmpty},
		{"RoundTripSmall", s.roundTripSmall},
		{"RoundTripLarge", s.roundTripLarge},
		{"CreateOnly", s.createOnly},
		{"ListPaging", s.listPaging},
		{"ListByPrefix", s.listByPrefix},
		{"GetMissing", s.getMissing},
		{"Delete", s.delete},
		{"CopyObject", s.copyObject},
		{"ConcurrentPuts", s.concurrentPuts},
		{"FailingReader", s.failingReader},
		{"CancelStopsUpload", s.cancelStopsUpload},
		{"InvalidKeys", s.invalidKeys},
		{"PrefixIsolation", s.prefixIsolation},
		{"BadCredentials", s.badCredentials},
		{"MissingBucket", s.missingBucket},
		{"TransientFaults", s.transientFaults},
		{"BoundedMemory", s.boundedMemory},
	} {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct {
	h Harness
	n atomic.Int64
}

// open returns a store under a prefix no other subtest uses.
func (s *suite) open(t *testing.T) (store.Store, string) {
	t.Helper()
	prefix := s.prefix(t)
	return s.h.Open(t, prefix), prefix
}

func (s *suite) prefix(t *testing.T) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, t.Name())
	return fmt.Sprintf("storetest/%d-%d-%s", time.Now().UnixNano()%1e9, s.n.Add(1), name)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, ctx context.Context, st store.Store, key string, data []byte) {
	t.Helper()
	if err := st.Put(ctx, key, bytes.NewReader(data)); err != nil {
		t.Fatalf("put %s (%d bytes): %v", key, len(data), err)
	}
}

func mustGet(t *testing.T, ctx context.Context, st store.Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return data
}

func mustList(t *testing.T, ctx context.Context, st store.Store, prefix string) []store.Object {
	t.Helper()
	objs, err := st.List(ctx, prefix)
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return objs
}

func keys(objs []store.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Key
	}
	return out
}

func (s *suite) roundTripEmpty(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	mustPut(t, ctx, st, "empty", nil)
	if got := mustGet(t, ctx, st, "empty"); len(got) != 0 {
		t.Fatalf("empty object came back with %d bytes", len(got))
	}
	objs := mustList(t, ctx, st, "")
	if len(objs) != 1 || objs[0].Key != "empty" || objs[0].Size != 0 {
		t.Fatalf("list after empty put: %+v", objs)
	}
}

func (s *suite) roundTripSmall(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	start := time.Now()
	data := []byte("a small object\x00with a NUL and\nnewlines")
	mustPut(t, ctx, st, "dir/sub/small.txt", data)
	if got := mustGet(t, ctx, st, "dir/sub/small.txt"); !bytes.Equal(got, data) {
		t.Fatalf("got %q, want %q", got, data)
	}
	objs := mustList(t, ctx, st, "dir/")
	if len(objs) != 1 || objs[0].Key != "dir/sub/small.txt" || objs[0].Size != int64(len(data)) {
		t.Fatalf("list: %+v", objs)
	}
	if m := objs[0].Modified; m.Before(start.Add(-time.Minute)) || m.After(time.Now().Add(time.Minute)) {
		t.Fatalf("modified time %v is not around now (%v)", m, start)
	}
}

// roundTripLarge moves an object of several parts, generated and checked
// while streaming so the test itself holds none of it.
func (s *suite) roundTripLarge(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	size := s.h.LargeSize
	src := newRandReader(1, size)

	before := s.wireCounts()
	if err := st.Put(ctx, "large.bin", src); err != nil {
		t.Fatalf("put %d bytes: %v", size, err)
	}
	put := s.wireCounts().Sub(before)
	if s.h.Wire != nil {
		minParts := int(size / s.h.Options.PartSize)
		if put.PartUploads < minParts || put.PartUploads < 2 {
			t.Fatalf("put of %d bytes with %d-byte parts sent %d part uploads, want at least %d: the multipart path was not taken",
				size, s.h.Options.PartSize, put.PartUploads, minParts)
		}
	}

	objs := mustList(t, ctx, st, "large")
	if len(objs) != 1 || objs[0].Size != size {
		t.Fatalf("list after large put: %+v, want one object of %d bytes", objs, size)
	}

	before = s.wireCounts()
	rc, err := st.Get(ctx, "large.bin")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	_ = rc.Close()
	if err != nil {
		t.Fatalf("read back after %d bytes: %v", n, err)
	}
	if n != size || !bytes.Equal(h.Sum(nil), src.Sum()) {
		t.Fatalf("read back %d bytes with a different digest (want %d bytes)", n, size)
	}
	get := s.wireCounts().Sub(before)
	if s.h.Wire != nil && get.RangedGets < 2 {
		t.Fatalf("get of %d bytes made %d ranged requests, want parallel ranges", size, get.RangedGets)
	}
	t.Logf("%d bytes: put in %d part uploads, got in %d ranged requests", size, put.PartUploads, get.RangedGets)
}

func (s *suite) wireCounts() Counts {
	if s.h.Wire == nil {
		return Counts{}
	}
	return s.h.Wire.Counts()
}

// createOnly: an object is written once. A second Put of its key fails
// with ErrExists and leaves it as it was, small or in parts; of two
// writers racing for one key exactly one wins and the object is the
// winner's; after a Delete the key can be written again.
func (s *suite) createOnly(t *testing.T) {
	ctx := ctxFor(t)
	st, prefix := s.open(t)
	mustPut(t, ctx, st, "k", []byte("first"))
	if err := st.Put(ctx, "k", strings.NewReader("second, longer")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second put of a key: %v, want ErrExists", err)
	}
	if got := string(mustGet(t, ctx, st, "k")); got != "first" {
		t.Fatalf("after a refused overwrite got %q", got)
	}
	objs := mustList(t, ctx, st, "")
	if len(objs) != 1 || objs[0].Size != int64(len("first")) {
		t.Fatalf("list after a refused overwrite: %+v", objs)
	}
	large := 3*s.h.Options.PartSize + 5
	first := newRandReader(11, large)
	if err := st.Put(ctx, "large", first); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "large", newRandReader(12, large)); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second put of a large key: %v, want ErrExists", err)
	}
	if got := sha256.Sum256(mustGet(t, ctx, st, "large")); !bytes.Equal(got[:], first.Sum()) {
		t.Fatal("a refused overwrite in parts changed the object")
	}
	// Three races of writers of one request, one of writers in parts
	// (whose winner is decided once, when the parts complete).
	for _, size := range []int64{1000, large} {
		rounds := 3
		if size == large {
			rounds = 1
		}
		for round := range rounds {
			key := fmt.Sprintf("race-%d-%d", size, round)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			srcs := []*randReader{newRandReader(uint64(20+round), size), newRandReader(uint64(40+round), size)}
			for i := range 2 {
				wg.Go(func() { errs[i] = st.Put(ctx, key, srcs[i]) })
			}
			wg.Wait()
			won := -1
			for i, err := range errs {
				switch {
				case err == nil && won < 0:
					won = i
				case err == nil && s.h.RacingWritersBothWin == "":
					t.Fatalf("%s: both writers of one key succeeded", key)
				case err == nil:
				case !errors.Is(err, store.ErrExists):
					t.Fatalf("%s: the losing writer: %v, want ErrExists", key, err)
				}
			}
			if won < 0 {
				t.Fatalf("%s: neither writer won: %v", key, errs)
			}
			if s.h.RacingWritersBothWin != "" {
				// Whoever won, the object is one writer's whole.
				got := sha256.Sum256(mustGet(t, ctx, st, key))
				if !bytes.Equal(got[:], srcs[0].Sum()) && !bytes.Equal(got[:], srcs[1].Sum()) {
					t.Fatalf("%s: the object is neither writer's", key)
				}
				t.Logf("%s: writers' results %v; which one won is not asserted: %s", key, errs, s.h.RacingWritersBothWin)
				continue
			}
			if got := sha256.Sum256(mustGet(t, ctx, st, key)); !bytes.Equal(got[:], srcs[won].Sum()) {
				t.Fatalf("%s: the object is not the winner's", key)
			}
		}
	}
	if err := st.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, ctx, st, "k", []byte("again"))
	s.noPendingUploads(t, prefix)
}

// listPaging stores more objects than one page of any cloud listing
// (1000) holds.
func (s *suite) listPaging(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	const n = 1042
	putMany(t, ctx, st, n, func(i int) string { return fmt.Sprintf("many/%05d", i) })
	mustPut(t, ctx, st, "other", []byte("x"))

	objs := mustList(t, ctx, st, "many/")
	if len(objs) != n {
		t.Fatalf("listed %d objects, want %d", len(objs), n)
	}
	for i, o := range objs {
		if want := fmt.Sprintf("many/%05d", i); o.Key != want || o.Size != int64(len(want)) {
			t.Fatalf("object %d is %+v, want key %s of %d bytes (sorted, none missing or repeated)", i, o, want, len(want))
		}
	}
	if all := mustList(t, ctx, st, ""); len(all) != n+1 {
		t.Fatalf("listed %d objects in all, want %d", len(all), n+1)
	}
}

func putMany(t *testing.T, ctx context.Context, st store.Store, n int, key func(int) string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			k := key(i)
			if err := st.Put(ctx, k, strings.NewReader(k)); err != nil {
				errs <- fmt.Errorf("put %s: %w", k, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func (s *suite) listByPrefix(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	for _, k := range []string{"v2/Full-00000001-00000010-1", "v2/Incr-00000011-00000020-2", "v2/Incr-00000021-00000030-3", "v1/Backup-1/Full-1", "v20/x"} {
		mustPut(t, ctx, st, k, []byte(k))
	}
	for prefix, want := range map[string][]string{
		"v2/Incr": {"v2/Incr-00000011-00000020-2", "v2/Incr-00000021-00000030-3"},
		"v2/":     {"v2/Full-00000001-00000010-1", "v2/Incr-00000011-00000020-2", "v2/Incr-00000021-00000030-3"},
		"v2":      {"v2/Full-00000001-00000010-1", "v2/Incr-00000011-00000020-2", "v2/Incr-00000021-00000030-3", "v20/x"},
		"v1/":     {"v1/Backup-1/Full-1"},
		"v3/":     {},
		"nothing": {},
	} {
		got := keys(mustList(t, ctx, st, prefix))
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("list %q = %v, want %v", prefix, got, want)
		}
	}
}

func (s *suite) getMissing(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	_, err := st.Get(ctx, "no/such/object")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get of a missing key: %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "no/such/object") {
		t.Fatalf("error %q does not name the key", err)
	}
}

func (s *suite) delete(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	if err := st.Delete(ctx, "never-stored"); err != nil {
		t.Fatalf("delete of a missing key: %v, want nil", err)
	}
	mustPut(t, ctx, st, "a/doomed", []byte("x"))
	mustPut(t, ctx, st, "a/kept", []byte("y"))
	if err := st.Delete(ctx, "a/doomed"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "a/doomed"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if got := keys(mustList(t, ctx, st, "")); strings.Join(got, ",") != "a/kept" {
		t.Fatalf("list after delete: %v", got)
	}
	if err := st.Delete(ctx, "a/doomed"); err != nil {
		t.Fatalf("second delete: %v, want nil", err)
	}
}

// copyObject copies an object of several parts inside the store: on the
// server when the backend is a store.Copier, with no object byte on the
// wire, else through Get and Put. The copy is whole, create-only, and a
// missing source is ErrNotFound.
func (s *suite) copyObject(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	size := 2*s.h.Options.PartSize + 77
	data, err := io.ReadAll(newRandReader(9, size))
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, ctx, st, "src", data)
	before := s.wireCounts()
	onServer, err := store.CopyObject(ctx, st, "src", "dst")
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	moved := s.wireCounts().Sub(before)
	if onServer && moved.BytesUp+moved.BytesDown > size/4 {
		t.Fatalf("a copy on the server moved %d bytes up and %d down for an object of %d", moved.BytesUp, moved.BytesDown, size)
	}
	if got := mustGet(t, ctx, st, "dst"); !bytes.Equal(got, data) {
		t.Fatalf("the copy holds %d bytes, not the %d of its source", len(got), len(data))
	}
	if _, err := store.CopyObject(ctx, st, "src", "dst"); !errors.Is(err, store.ErrExists) {
		t.Fatalf("copy over an object: %v, want ErrExists", err)
	}
	if _, err := store.CopyObject(ctx, st, "missing", "dst2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("copy of a missing object: %v, want ErrNotFound", err)
	}
	if objs := mustList(t, ctx, st, "dst"); len(objs) != 1 || objs[0].Size != size {
		t.Fatalf("listed after the copies: %+v", objs)
	}
	t.Logf("copied %d bytes on the server: %v; %d bytes moved up, %d down", size, onServer, moved.BytesUp, moved.BytesDown)
}

func (s *suite) concurrentPuts(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.Put(ctx, fmt.Sprintf("c/%02d", i), newRandReader(uint64(100+i), 256<<10+int64(i)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	for i := range n {
		want := newRandReader(uint64(100+i), 256<<10+int64(i))
		wantData, _ := io.ReadAll(want)
		if got := mustGet(t, ctx, st, fmt.Sprintf("c/%02d", i)); !bytes.Equal(got, wantData) {
			t.Fatalf("object %d differs after concurrent puts", i)
		}
	}
}

var errBroken = errors.New("storetest: source broke off")

// failingReader returns errBroken once it has produced n bytes.
type failingReader struct {
	r io.Reader
	n int64
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errBroken
	}
	if int64(len(p)) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= int64(n)
	return n, err
}

func (s *suite) failingReader(t *testing.T) {
	ctx := ctxFor(t)
	st, prefix := s.open(t)
	mustPut(t, ctx, st, "kept", []byte("previous"))
	for name, n := range map[string]int64{
		"small":             1000,
		"after-three-parts": 3*s.h.Options.PartSize + 17,
	} {
		t.Run(name, func(t *testing.T) {
			src := &failingReader{r: newRandReader(2, 1<<40), n: n}
			err := st.Put(ctx, "broken-"+name, src)
			if !errors.Is(err, errBroken) {
				t.Fatalf("put from a reader that fails after %d bytes: %v, want the reader's error", n, err)
			}
			if _, err := st.Get(ctx, "broken-"+name); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("get of the failed put: %v, want ErrNotFound", err)
			}
			err = st.Put(ctx, "kept", &failingReader{r: newRandReader(3, 1<<40), n: n})
			if !errors.Is(err, errBroken) && !errors.Is(err, store.ErrExists) {
				t.Fatalf("failed put over an object: %v", err)
			}
			if got := string(mustGet(t, ctx, st, "kept")); got != "previous" {
				t.Fatalf("a failed overwrite changed the object to %d bytes", len(got))
			}
		})
	}
	if got := keys(mustList(t, ctx, st, "")); strings.Join(got, ",") != "kept" {
		t.Fatalf("list after failed puts: %v, want only the object stored before", got)
	}
	s.noPendingUploads(t, prefix)
}

func (s *suite) noPendingUploads(t *testing.T, prefix string) {
	t.Helper()
	if s.h.PendingUploads == nil {
		return
	}
	if n := s.h.PendingUploads(t, prefix); n != 0 {
		t.Fatalf("%d multipart upload(s) left unfinished under %s: a failed put must abort its upload", n, prefix)
	}
}

// countingReader produces endless data and counts what was read.
type countingReader struct {
	r    io.Reader
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (s *suite) cancelStopsUpload(t *testing.T) {
	st, prefix := s.open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &countingReader{r: newRandReader(4, 1<<40)}
	trigger := 3 * s.h.Options.PartSize

	done := make(chan error, 1)
	go func() { done <- st.Put(ctx, "cancelled", src) }()
	for src.read.Load() < trigger {
		select {
		case err := <-done:
			t.Fatalf("put of an endless reader ended by itself: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	atCancel := src.read.Load()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("put still running 60s after its context was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled put returned %v, want context.Canceled", err)
	}
	// What the backend still pulled from the source after the cancel is
	// what it had buffered or in flight: a few parts, not the stream.
	after := src.read.Load() - atCancel
	if limit := int64(s.h.Options.Concurrency+2) * s.h.Options.PartSize; after > limit {
		t.Fatalf("read %d bytes after cancel, more than %d (concurrency+2 parts)", after, limit)
	}
	check := ctxFor(t)
	if objs := mustList(t, check, st, ""); len(objs) != 0 {
		t.Fatalf("cancelled put left %v", keys(objs))
	}
	s.noPendingUploads(t, prefix)
}

func (s *suite) invalidKeys(t *testing.T) {
	ctx := ctxFor(t)
	st, _ := s.open(t)
	for _, key := range []string{"", "/abs", "../escape", "a/../../b", "a//b", "./a", "a/", `a\b`, "a\x00b", strings.Repeat("k", store.MaxKeyLen+1)} {
		if err := st.Put(ctx, key, strings.NewReader("x")); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("put %q: %v, want ErrInvalidKey", key, err)
		}
		if _, err := st.Get(ctx, key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("get %q: %v, want ErrInvalidKey", key, err)
		}
		if err := st.Delete(ctx, key); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("delete %q: %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"../", "/abs", "a/../b"} {
		if _, err := st.List(ctx, prefix); !errors.Is(err, store.ErrInvalidKey) {
			t.Errorf("list %q: %v, want ErrInvalidKey", prefix, err)
		}
	}
}

// prefixIsolation puts two stores in one bucket whose prefixes share
// leading characters ("a" and "ab"): neither may see the other's objects.
func (s *suite) prefixIsolation(t *testing.T) {
	ctx := ctxFor(t)
	base := s.prefix(t)
	a := s.h.Open(t, base+"/a")
	ab := s.h.Open(t, base+"/ab")
	mustPut(t, ctx, a, "k", []byte("in a"))
	mustPut(t, ctx, ab, "k", []byte("in ab"))
	mustPut(t, ctx, ab, "only-ab", []byte("x"))

	if got := string(mustGet(t, ctx, a, "k")); got != "in a" {
		t.Fatalf("a sees %q", got)
	}
	if got := string(mustGet(t, ctx, ab, "k")); got != "in ab" {
		t.Fatalf("ab sees %q", got)
	}
	if got := keys(mustList(t, ctx, a, "")); strings.Join(got, ",") != "k" {
		t.Fatalf("a lists %v", got)
	}
	if _, err := a.Get(ctx, "only-ab"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a reads ab's object: %v", err)
	}
	if err := ab.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if got := string(mustGet(t, ctx, a, "k")); got != "in a" {
		t.Fatalf("deleting in ab changed a: %q", got)
	}
}

// permanent checks the failure of a store that cannot work: the error says
// what is wrong, and the backend gave up without a retry storm.
func (s *suite) permanent(t *testing.T, open func(*testing.T) (store.Store, error), want error, hint string) {
	t.Helper()
	ctx := ctxFor(t)
	before := s.wireCounts()
	st, err := open(t)
	if err == nil {
		err = st.Put(ctx, "k", strings.NewReader("x"))
	}
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want an error wrapping %q", err, want)
	}
	if !strings.Contains(err.Error(), hint) {
		t.Fatalf("error %q does not say %q", err, hint)
	}
	if st != nil {
		if _, err := st.List(ctx, ""); !errors.Is(err, want) {
			t.Fatalf("list: %v, want an error wrapping %q", err, want)
		}
	}
	if n := s.wireCounts().Sub(before).Requests; s.h.Wire != nil && n > 4 {
		t.Fatalf("%d requests for a failure no retry can fix", n)
	}
	t.Logf("error: %v", err)
}

func (s *suite) badCredentials(t *testing.T) {
	if s.h.BadCredentials == nil {
		t.Skip("backend has no credentials")
	}
	s.permanent(t, s.h.BadCredentials, store.ErrAccessDenied, "credentials")
}

func (s *suite) missingBucket(t *testing.T) {
	if s.h.MissingBucket == nil {
		t.Skip("backend has no buckets")
	}
	s.permanent(t, s.h.MissingBucket, store.ErrBucketNotFound, "does not exist")
}

// transientFaults answers the first attempt of every request with a 503:
// every operation must still succeed through the backend's retries.
func (s *suite) transientFaults(t *testing.T) {
	if s.h.Wire == nil {
		t.Skip("backend does not speak HTTP")
	}
	ctx := ctxFor(t)
	st, _ := s.open(t)
	s.h.Wire.FailFirstAttempts(true)
	defer s.h.Wire.FailFirstAttempts(false)
	before := s.wireCounts()

	size := 3*s.h.Options.PartSize + 5
	src := newRandReader(5, size)
	if err := st.Put(ctx, "parted", src); err != nil {
		t.Fatalf("put of %d bytes through a flaky wire: %v", size, err)
	}
	mustPut(t, ctx, st, "small", []byte("small"))
	if objs := mustList(t, ctx, st, ""); len(objs) != 2 {
		t.Fatalf("list through a flaky wire: %v", keys(objs))
	}
	rc, err := st.Get(ctx, "parted")
	if err != nil {
		t.Fatalf("get through a flaky wire: %v", err)
	}
	h := sha256.New()
	_, err = io.Copy(h, rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(h.Sum(nil), src.Sum()) {
		t.Fatalf("read through a flaky wire: %v (or digest differs)", err)
	}
	if got := string(mustGet(t, ctx, st, "small")); got != "small" {
		t.Fatalf("got %q", got)
	}
	if err := st.Delete(ctx, "small"); err != nil {
		t.Fatalf("delete through a flaky wire: %v", err)
	}
	c := s.wireCounts().Sub(before)
	if c.Injected == 0 {
		t.Fatal("no fault was injected")
	}
	t.Logf("%d requests, %d answered 503 and retried", c.Requests, c.Injected)
}

// boundedMemory moves an object several times larger than the memory the
// backend may hold for it, and watches the heap while it does.
func (s *suite) boundedMemory(t *testing.T) {
	if s.h.HoldsObjects {
		t.Skip("backend keeps objects in memory")
	}
	ctx := ctxFor(t)
	st, _ := s.open(t)
	budget := int64(s.h.Options.Concurrency+2) * s.h.Options.PartSize
	// The heap holds garbage until the collector runs (up to GOGC=100% over
	// the live heap), and the SDKs keep some state of their own.
	limit := 2*budget + 48<<20
	size := max(2*limit, 128<<20)

	src := newRandReader(6, size)
	peak, err := peakHeap(func() error { return st.Put(ctx, "big", src) })
	if err != nil {
		t.Fatalf("put %d bytes: %v", size, err)
	}
	if peak > limit {
		t.Fatalf("heap grew by %d MiB while putting %d MiB, limit %d MiB", peak>>20, size>>20, limit>>20)
	}
	var n int64
	h := sha256.New()
	getPeak, err := peakHeap(func() error {
		rc, err := st.Get(ctx, "big")
		if err != nil {
			return err
		}
		defer rc.Close()
		n, err = io.Copy(h, rc)
		return err
	})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if n != size || !bytes.Equal(h.Sum(nil), src.Sum()) {
		t.Fatalf("read back %d bytes with a different digest", n)
	}
	if getPeak > limit {
		t.Fatalf("heap grew by %d MiB while getting %d MiB, limit %d MiB", getPeak>>20, size>>20, limit>>20)
	}
	t.Logf("%d MiB object: heap grew by at most %d MiB putting and %d MiB getting (limit %d MiB)", size>>20, peak>>20, getPeak>>20, limit>>20)
}

// peakHeap runs fn and returns by how much the heap grew above where it was
// before, sampled every few milliseconds.
func peakHeap(fn func() error) (int64, error) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	base := read()
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if v := read() - base; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	err := fn()
	close(stop)
	wg.Wait()
	return peak.Load(), err
}

// randReader produces size seeded pseudo-random bytes and their SHA-256.
type randReader struct {
	rng  *rand.ChaCha8
	left int64
	h    interface {
		io.Writer
		Sum([]byte) []byte
	}
}

func newRandReader(seed uint64, size int64) *randReader {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return &randReader{rng: rand.NewChaCha8(s), left: size, h: sha256.New()}
}

func (r *randReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, _ := r.rng.Read(p)
	r.left -= int64(n)
	_, _ = r.h.Write(p[:n])
	return n, nil
}

// Sum returns the SHA-256 of the bytes produced so far.
func (r *randReader) Sum() []byte { return r.h.Sum(nil) }
