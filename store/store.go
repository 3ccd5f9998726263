package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Store is a flat key space of immutable objects under one prefix.
//
// Keys are slash-separated relative paths (see CheckKey). Implementations are
// safe for concurrent use.
type Store interface {
	// Put creates the object key from the bytes of r, only if no object is
	// there: objects are written once and never replaced, so two writers
	// of one key cannot silently overwrite each other, and a bucket that
	// refuses overwrites (a WORM lock) takes every write. When key holds an
	// object, or another writer's completes first, Put fails with ErrExists
	// and the object is the one already there. The object becomes visible
	// only once it is complete: when Put fails, or ctx is cancelled, List
	// does not show it and Get returns ErrNotFound (or the other writer's).
	Put(ctx context.Context, key string, r io.Reader) error
	// Get opens the object stored under key; ErrNotFound when there is none.
	// The caller closes the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns the objects whose keys start with prefix, sorted by key.
	// Prefix matching is on the key string: "v2/Full" matches
	// "v2/Full-00000001-00000010-1700000000".
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes the object under key; deleting a missing key is not an
	// error. An object a write-once lock keeps is ErrLocked.
	Delete(ctx context.Context, key string) error
}

// Object describes a stored object.
type Object struct {
	// Key relative to the store's prefix.
	Key      string
	Size     int64
	Modified time.Time
}

// ExcludeTag is etcd-backup-restore's mark of a snapshot an operator
// takes out of the backups on a bucket where it cannot be deleted: with
// the value "true" (GCS custom metadata, an Azure blob index tag, an S3
// tag on the first version under a delete marker) the object is not
// listed, so no restore, compaction or retention uses it.
const ExcludeTag = "x-etcd-snapshot-exclude"

var (
	// ErrNotFound is returned by Get for a key with no object.
	ErrNotFound = errors.New("object not found")
	// ErrExists is returned by Put for a key that holds an object already:
	// one written before, or another writer's that completed first.
	ErrExists = errors.New("an object exists under this key; objects are written once")
	// ErrInvalidKey is returned for a key that breaks the rules of CheckKey.
	ErrInvalidKey = errors.New("invalid key")
	// ErrLocked is returned by Delete for an object a write-once lock
	// keeps (S3 Object Lock, a GCS retention policy or hold, an Azure
	// immutability policy or legal hold): it stays until the lock ends.
	// Retention keeps such an object and tries again on a later run.
	ErrLocked = errors.New("the object is locked against deletion (write-once retention)")
	// ErrAccessDenied is returned when the store refuses the credentials.
	ErrAccessDenied = errors.New("access denied")
	// ErrBucketNotFound is returned when the bucket or container of the
	// store URL does not exist.
	ErrBucketNotFound = errors.New("bucket does not exist")
	// ErrBadURL: the store URL itself is wrong (its scheme, bucket,
	// prefix or options); no request was made. Messages keep their own
	// wording: errors.Is tells.
	ErrBadURL = errors.New("the store URL is wrong")
)

// Options tune how a backend moves objects. The zero value is what an
// operator would run in production.
type Options struct {
	// Logger receives retries and other events worth a line; nil discards.
	Logger *slog.Logger
	// PartSize is the size of one part of a large object moved in parts
	// (S3 multipart, GCS resumable chunks, Azure blocks), up and down;
	// 0 means DefaultPartSize. Memory in flight per transfer stays within
	// about (Concurrency+2) × PartSize.
	PartSize int64
	// Concurrency is the number of parts in flight per transfer; 0 means
	// DefaultConcurrency.
	Concurrency int
	// Transport carries the backend's HTTP requests; nil means the SDK's
	// default. Tests wrap it to watch and disturb the wire.
	Transport http.RoundTripper
	// EnvPrefix prefixes the etcd-backup-restore credential variables a
	// cloud backend reads (SOURCE_ reads SOURCE_AWS_APPLICATION_CREDENTIALS
	// and so on, as its copy of backups does for the source store). The
	// URL parameter env-prefix sets it.
	EnvPrefix string
}

const (
	// DefaultPartSize is the part size of Options' zero value.
	DefaultPartSize = 8 << 20
	// DefaultConcurrency is the concurrency of Options' zero value.
	DefaultConcurrency = 4
)

// WithDefaults returns o with its zero fields set to their documented
// defaults; backends call it once when they open.
func (o Options) WithDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return o
}

// Opened turns the result of a backend's New into an Opener's result, so
// that a failed open is a nil Store, not an interface holding a nil
// pointer.
func Opened[S Store](st S, err error) (Store, error) {
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Opener opens a store for a parsed URL of the scheme it was registered for.
type Opener func(ctx context.Context, u *url.URL, opts Options) (Store, error)

// registry maps URL schemes to openers. Backends fill it from init, which is
// the only init-time side effect the project allows.
var registry = struct {
	sync.RWMutex
	openers map[string]Opener
}{openers: map[string]Opener{}}

// Register makes Open understand scheme. It panics when the scheme is
// registered twice, which is a programming error caught at start.
func Register(scheme string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.openers[scheme]; dup {
		panic("store: scheme " + scheme + " registered twice")
	}
	registry.openers[scheme] = open
}

func init() {
	Register("file", openFile)
	Register("mem", openMem)
}

// Exister is a store that can tell a location that does not exist from
// an empty one: the file store, whose directory is made by the first
// write. Object stores cannot, and do not implement it.
type Exister interface {
	Exists(ctx context.Context) (bool, error)
}

// badURL marks err as a mistake in the URL (ErrBadURL) without changing
// its message.
type badURL struct{ error }

func (e badURL) Unwrap() error        { return e.error }
func (e badURL) Is(target error) bool { return target == ErrBadURL }

// BadURL marks err, a backend's complaint about its URL, as ErrBadURL.
func BadURL(err error) error {
	if err == nil {
		return nil
	}
	return badURL{err}
}

// Open opens the store a URL names, with default options. See OpenWith.
func Open(ctx context.Context, rawURL string) (Store, error) {
	return OpenWith(ctx, rawURL, Options{})
}

// OpenWith opens the store a URL names:
//
//	file:///var/backups/etcd        (a bare path is read as a file URL too)
//	mem://
//	s3://bucket/prefix?region=…&endpoint=…&path-style=true
//	gs://bucket/prefix?endpoint=…
//	azblob://container/prefix?account=…&endpoint=…
//
// Cloud schemes are available once their package is imported, for example
// import _ "github.com/etcdkit/etcdkit/store/s3", or every backend with
// import _ "github.com/etcdkit/etcdkit/store/all".
func OpenWith(ctx context.Context, rawURL string, opts Options) (Store, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, BadURL(err)
	}
	open, err := opener(u)
	if err != nil {
		return nil, err
	}
	return open(ctx, u, opts.WithDefaults())
}

// CheckURL reports a URL OpenWith would refuse for its form or its
// scheme, without opening the store: its options and bucket are checked
// when it is opened.
func CheckURL(rawURL string) error {
	u, err := parseURL(rawURL)
	if err != nil {
		return BadURL(err)
	}
	_, err = opener(u)
	return err
}

// opener is the backend that opens u's scheme.
func opener(u *url.URL) (func(context.Context, *url.URL, Options) (Store, error), error) {
	registry.RLock()
	open, ok := registry.openers[u.Scheme]
	known := make([]string, 0, len(registry.openers))
	for s := range registry.openers {
		known = append(known, s+"://")
	}
	registry.RUnlock()
	if !ok {
		slices.Sort(known)
		return nil, BadURL(fmt.Errorf("store %s: unknown scheme %q (known here: %s; cloud schemes need their package imported, e.g. github.com/etcdkit/etcdkit/store/s3)",
			u.Redacted(), u.Scheme, strings.Join(known, ", ")))
	}
	return open, nil
}

func parseURL(rawURL string) (*url.URL, error) {
	if rawURL == "" {
		return nil, errors.New("store: empty URL (give file:///path, s3://bucket/prefix, gs://…, azblob://… or mem://)")
	}
	if !strings.Contains(rawURL, "://") {
		// "s3:/bucket" and "s3:bucket" are mistyped URLs, not paths: a
		// backup written to ./s3:/bucket would be lost to its reader.
		if scheme, _, ok := strings.Cut(rawURL, ":"); ok && len(scheme) > 1 && !strings.Contains(scheme, "/") && isScheme(scheme) {
			return nil, fmt.Errorf("store %s: not a URL: write %s://… (a path with a colon: ./%s)", rawURL, scheme, rawURL)
		}
		abs, err := filepath.Abs(rawURL)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", rawURL, err)
		}
		return &url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", rawURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("store %s: no scheme (give file:///path, s3://bucket/prefix, gs://…, azblob://… or mem://)", rawURL)
	}
	return u, nil
}

// isScheme says whether s could be a URL's scheme (RFC 3986: a letter,
// then letters, digits, "+", "-" or ".").
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// Options of a store URL's query are read through a Query so that an option
// nobody asked for is reported: a typo must not silently fall back to a
// default.
type Query struct {
	values url.Values
	used   map[string]bool
}

// NewQuery wraps the query of u.
func NewQuery(u *url.URL) *Query {
	return &Query{values: u.Query(), used: map[string]bool{}}
}

// Get returns the value of option name, "" when absent.
func (q *Query) Get(name string) string {
	q.used[name] = true
	return q.values.Get(name)
}

// Bool returns option name as a boolean; absent is false.
func (q *Query) Bool(name string) (bool, error) {
	v := q.Get(name)
	switch strings.ToLower(v) {
	case "", "false", "0", "no":
		return false, nil
	case "true", "1", "yes":
		return true, nil
	}
	return false, BadURL(fmt.Errorf("option %s=%q is not a boolean (use true or false)", name, v))
}

// Unused returns an error naming the options that were given but never read.
func (q *Query) Unused() error {
	var unknown []string
	for k := range q.values {
		if !q.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	known := make([]string, 0, len(q.used))
	for k := range q.used {
		known = append(known, k)
	}
	slices.Sort(known)
	return BadURL(fmt.Errorf("unknown option(s) %s (this scheme knows: %s)", strings.Join(unknown, ", "), strings.Join(known, ", ")))
}
