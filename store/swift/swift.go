package swift

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/containers"
	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/objects"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/internal/xfer"
)

func init() {
	store.Register("swift", open)
}

// Config describes a Swift store.
type Config struct {
	Container string
	// Prefix every key is stored under; "" means the container's root.
	Prefix string
	// Credentials, when their AuthURL is set, are used instead of the
	// files and variables the package documentation names.
	Credentials Credentials
	// Options tune transfers and carry the logger.
	Options store.Options
}

// Store is a Swift container (or a prefix of one).
type Store struct {
	cfg  Config
	loc  store.Location
	auth *authenticator
}

func open(ctx context.Context, u *url.URL, opts store.Options) (store.Store, error) {
	loc, q, err := store.ParseLocation(u, "container")
	if err != nil {
		return nil, err
	}
	opts.EnvPrefix = q.Get("env-prefix")
	if err := q.Unused(); err != nil {
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	return store.Opened(New(ctx, Config{Container: loc.Bucket, Prefix: loc.Prefix, Options: opts}))
}

// New authenticates, and checks that the container of cfg exists and that
// the credentials may read it.
func New(ctx context.Context, cfg Config) (*Store, error) {
	loc, err := store.NewLocation("swift", cfg.Container, cfg.Prefix, "container")
	if err != nil {
		return nil, err
	}
	cfg.Prefix = loc.Prefix
	cfg.Options = cfg.Options.WithDefaults()
	s := &Store{cfg: cfg, loc: loc}
	base := cfg.Options.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	s.auth, err = newAuthenticator(cfg.Credentials, cfg.Options, retrying{base: base, log: cfg.Options.Logger})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.loc, err)
	}
	sc, err := s.auth.service(ctx)
	if err != nil {
		return nil, s.fail("open", "", err)
	}
	if err := containers.Get(ctx, sc, cfg.Container, nil).Err; err != nil {
		return nil, s.fail("open", "", err)
	}
	return s, nil
}

func (s *Store) String() string { return s.loc.String() }

// isSegment reports whether an object name is a segment of a large object:
// its last element is ten digits, as etcd-backup-restore and this package
// name them.
func isSegment(name string) bool {
	i := strings.LastIndexByte(name, '/')
	if i < 0 || len(name)-i-1 != 10 {
		return false
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// object is the object name of key; keys whose last element is ten digits
// are the segments' and refused.
func (s *Store) object(key string) (string, error) {
	name, err := s.loc.Object(key)
	if err != nil {
		return "", err
	}
	if isSegment(name) {
		return "", fmt.Errorf("store %s: %w: %q ends in ten digits, the names of large objects' segments on Swift", s.loc, store.ErrInvalidKey, key)
	}
	return name, nil
}

// uploadMeta marks an object with its upload, so that a Put whose request
// was retried after its answer was lost knows its own object from
// another writer's.
const uploadMeta = "Etcdkit-Upload"

// Put sends an object of up to PartSize bytes in one request and a larger
// one as segments and a static large object manifest written last, both
// only where no object is.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	sc, err := s.auth.service(ctx)
	if err != nil {
		return s.fail("put", key, err)
	}
	var tag [8]byte
	_, _ = rand.Read(tag[:])
	id := hex.EncodeToString(tag[:])
	src := xfer.ContextReader(ctx, r)
	first := make([]byte, s.cfg.Options.PartSize)
	n, err := io.ReadFull(src, first)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = objects.Create(ctx, sc, s.cfg.Container, name, objects.CreateOpts{
			Content:     bytes.NewReader(first[:n]),
			IfNoneMatch: "*",
			Metadata:    map[string]string{uploadMeta: id},
		}).Err
		return s.created(ctx, sc, key, name, id, err)
	case err != nil:
		return s.fail("put", key, err)
	}
	// A large object already there is refused before its bytes are sent;
	// the manifest's condition decides a race.
	if err := objects.Get(ctx, sc, s.cfg.Container, name, nil).Err; err == nil {
		return fmt.Errorf("store %s: put %s: %w", s.loc, key, store.ErrExists)
	} else if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return s.fail("put", key, err)
	}
	segs, err := s.putSegments(ctx, sc, name, first, src)
	if err == nil {
		err = s.putManifest(ctx, sc, name, id, segs)
		err = s.created(ctx, sc, key, name, id, err)
	} else {
		err = s.fail("put", key, err)
	}
	if err != nil {
		// The segments of a failed put are nobody's: removed with a
		// deadline of their own, since ctx may be what failed.
		rm, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		names := make([]string, len(segs))
		for i, sg := range segs {
			names[i] = sg.name
		}
		if rmErr := s.deleteAll(rm, sc, names); rmErr != nil {
			s.cfg.Options.Logger.Warn("the segments of a failed upload were not all removed; no listing shows them",
				"store", s.loc.String(), "key", key, "err", rmErr)
		}
	}
	return err
}

// created turns the answer to a conditional create into Put's result: a
// 412 is ErrExists unless the object there is this upload's own (a retry
// after an answer that was lost). Swift checks If-None-Match against the
// object stored when a request arrives, so two creates in flight at once
// may both be taken, the later one's standing: a create that is no longer
// the object once it is taken is ErrExists too.
func (s *Store) created(ctx context.Context, sc *gophercloud.ServiceClient, key, name, id string, err error) error {
	if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusPreconditionFailed) {
		return s.fail("put", key, err)
	}
	meta, herr := s.lookAfterCreate(ctx, sc, name)
	switch {
	case herr == nil && meta[uploadMeta] == id:
		return nil
	case err != nil || herr == nil:
		return fmt.Errorf("store %s: put %s: %w", s.loc, key, store.ErrExists)
	case gophercloud.ResponseCodeIs(herr, http.StatusNotFound):
		// Taken, then gone: deleted at once by someone else.
		return fmt.Errorf("store %s: put %s: the object was not there right after it was written: %w", s.loc, key, herr)
	}
	return s.fail("put", key, herr)
}

// lookAfterCreate reads the metadata of an object just taken. While two
// writers of one key race, an object server can answer 404 for an object
// it holds: it lists the object's files, a newer one replaces the file it
// listed, and the open finds nothing. Swift's 404 there is a moment's, so
// it is asked again a few times, briefly, before it is believed.
func (s *Store) lookAfterCreate(ctx context.Context, sc *gophercloud.ServiceClient, name string) (map[string]string, error) {
	wait := 20 * time.Millisecond
	for try := 0; ; try++ {
		meta, err := objects.Get(ctx, sc, s.cfg.Container, name, objects.GetOpts{Newest: true}).ExtractMetadata()
		if err == nil || !gophercloud.ResponseCodeIs(err, http.StatusNotFound) || try == 4 {
			return meta, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait *= 2
	}
}

// segment is one uploaded segment of a large object.
type segment struct {
	name string
	etag string
	size int
}

// segmentsPerDoubling is how many segments of one size a large object has
// before its segments double: Swift's manifests hold 1,000 segments.
const segmentsPerDoubling = 200

// putSegments uploads first and the rest of src as segments, Concurrency
// at a time, and returns them in order (also when it fails, for removal).
func (s *Store) putSegments(ctx context.Context, sc *gophercloud.ServiceClient, name string, first []byte, src io.Reader) ([]*segment, error) {
	// Segment numbers start at a random point, so that two writers of one
	// key never write the same segment name.
	start, err := rand.Int(rand.Reader, big.NewInt(8_999_000_000))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pool := make(chan []byte, s.cfg.Options.Concurrency)
	for range s.cfg.Options.Concurrency - 1 {
		pool <- nil
	}
	var (
		wg   sync.WaitGroup
		segs []*segment
	)
	put := func(sg *segment, buf []byte) {
		defer wg.Done()
		defer func() { pool <- buf[:cap(buf)] }()
		h := md5.Sum(buf)
		sum := hex.EncodeToString(h[:])
		err := objects.Create(ctx, sc, s.cfg.Container, sg.name, objects.CreateOpts{
			Content: bytes.NewReader(buf),
			ETag:    sum,
		}).Err
		if err != nil {
			cancel(err)
			return
		}
		sg.etag, sg.size = sum, len(buf)
	}
	buf, n := first, len(first)
	for i := 0; ; i++ {
		sg := &segment{name: fmt.Sprintf("%s/%010d", name, start.Int64()+int64(i)+1)}
		segs = append(segs, sg)
		wg.Add(1)
		go put(sg, buf[:n])
		if n < len(buf) || len(segs) == 1000 {
			break
		}
		select {
		case buf = <-pool:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		size := int(s.cfg.Options.PartSize) << ((i + 1) / segmentsPerDoubling)
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		n, err = io.ReadFull(src, buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			cancel(err)
			break
		}
	}
	if ctx.Err() == nil && len(segs) == 1000 {
		// The manifest is full; one more byte means the object is too big.
		var one [1]byte
		if m, _ := io.ReadFull(src, one[:]); m > 0 {
			cancel(fmt.Errorf("the object is larger than the 1,000 segments of a manifest hold (6,200 parts of %d bytes): raise the part size", s.cfg.Options.PartSize))
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return segs, err
	}
	return segs, nil
}

// putManifest writes the static large object manifest of segs under name,
// only where no object is.
func (s *Store) putManifest(ctx context.Context, sc *gophercloud.ServiceClient, name, id string, segs []*segment) error {
	type entry struct {
		Path string `json:"path"`
		ETag string `json:"etag"`
		Size int    `json:"size_bytes"`
	}
	entries := make([]entry, len(segs))
	for i, sg := range segs {
		entries[i] = entry{Path: "/" + s.cfg.Container + "/" + sg.name, ETag: sg.etag, Size: sg.size}
	}
	body, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	return objects.Create(ctx, sc, s.cfg.Container, name, objects.CreateOpts{
		Content:           bytes.NewReader(body),
		NoETag:            true,
		MultipartManifest: "put",
		IfNoneMatch:       "*",
		Metadata:          map[string]string{uploadMeta: id},
	}).Err
}

// Get reads small objects in one request and larger ones in parallel
// ranges of the ETag found first, so an object replaced while it is read
// fails instead of mixing two versions.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, err
	}
	sc, err := s.auth.service(ctx)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	head, err := objects.Get(ctx, sc, s.cfg.Container, name, nil).Extract()
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	openRange := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		opts := objects.DownloadOpts{IfMatch: head.ETag}
		if n > 0 {
			opts.Range = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
		}
		res := objects.Download(ctx, sc, s.cfg.Container, name, opts)
		if res.Err != nil {
			return nil, s.fail("get", key, res.Err)
		}
		return res.Body, nil
	}
	if head.ContentLength <= s.cfg.Options.PartSize {
		return openRange(ctx, 0, 0)
	}
	return xfer.Ranged{
		Size:        head.ContentLength,
		PartSize:    s.cfg.Options.PartSize,
		Concurrency: s.cfg.Options.Concurrency,
		Retries:     3,
		Logger:      s.cfg.Options.Logger,
		Name:        s.loc.String() + "/" + key,
		Open:        openRange,
	}.Reader(ctx), nil
}

// List shows each object once: segments are left out, and a dynamic
// manifest (etcd-backup-restore's, listed with 0 bytes) has its segments'
// size.
func (s *Store) List(ctx context.Context, prefix string) ([]store.Object, error) {
	full, err := s.loc.ListPrefix(prefix)
	if err != nil {
		return nil, err
	}
	sc, err := s.auth.service(ctx)
	if err != nil {
		return nil, s.fail("list", prefix, err)
	}
	var (
		objs     []store.Object
		names    []string
		segBytes = map[string]int64{}
	)
	err = objects.List(sc, s.cfg.Container, objects.ListOpts{Prefix: full}).EachPage(ctx, func(_ context.Context, page pagination.Page) (bool, error) {
		infos, err := objects.ExtractInfo(page)
		if err != nil {
			return false, err
		}
		for _, o := range infos {
			if isSegment(o.Name) {
				segBytes[path.Dir(o.Name)] += o.Bytes
				continue
			}
			objs = append(objs, store.Object{Key: s.loc.Key(o.Name), Size: o.Bytes, Modified: o.LastModified})
			names = append(names, o.Name)
		}
		return true, nil
	})
	if err != nil {
		return nil, s.fail("list", prefix, err)
	}
	for i := range objs {
		if objs[i].Size == 0 {
			objs[i].Size = segBytes[names[i]]
		}
	}
	return objs, nil
}

// Delete removes the object, then its segments: an object is never left
// listed without all of its bytes.
func (s *Store) Delete(ctx context.Context, key string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	sc, err := s.auth.service(ctx)
	if err != nil {
		return s.fail("delete", key, err)
	}
	if err := objects.Delete(ctx, sc, s.cfg.Container, name, nil).Err; err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return s.fail("delete", key, err)
	}
	var segs []string
	err = objects.List(sc, s.cfg.Container, objects.ListOpts{Prefix: name + "/"}).EachPage(ctx, func(_ context.Context, page pagination.Page) (bool, error) {
		infos, err := objects.ExtractInfo(page)
		if err != nil {
			return false, err
		}
		for _, o := range infos {
			if isSegment(o.Name) && path.Dir(o.Name) == name {
				segs = append(segs, o.Name)
			}
		}
		return true, nil
	})
	if err == nil {
		err = s.deleteAll(ctx, sc, segs)
	}
	if err != nil {
		return s.fail("delete", key+"'s segments", err)
	}
	return nil
}

// deleteAll deletes the named objects, Concurrency at a time; missing ones
// are no error.
func (s *Store) deleteAll(ctx context.Context, sc *gophercloud.ServiceClient, names []string) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, s.cfg.Options.Concurrency)
	for _, name := range names {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := objects.Delete(ctx, sc, s.cfg.Container, name, nil).Err
			if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
				mu.Lock()
				first = cmp.Or(first, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// fail wraps err with the store and the operation, and with the store
// error a caller can match, plus what to do about it.
func (s *Store) fail(op, key string, err error) error {
	what := op
	if key != "" {
		what += " " + key
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAccessDenied) || errors.Is(err, store.ErrBucketNotFound) {
		return err // classified already, by a range opener or the authenticator
	}
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound) && (op == "open" || op == "put" || op == "list"):
		return fmt.Errorf("store %s: %s: %w: container %q (create it, or fix the container of the store URL): %w",
			s.loc, what, store.ErrBucketNotFound, s.cfg.Container, err)
	case gophercloud.ResponseCodeIs(err, http.StatusPreconditionFailed) && op == "put":
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrExists)
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrNotFound)
	case gophercloud.ResponseCodeIs(err, http.StatusUnauthorized) || gophercloud.ResponseCodeIs(err, http.StatusForbidden):
		return fmt.Errorf("store %s: %s: %w: check the credentials (%s) and their rights on container %q: %w",
			s.loc, what, store.ErrAccessDenied, s.auth.from, s.cfg.Container, err)
	}
	return fmt.Errorf("store %s: %s: %w", s.loc, what, err)
}
