package gcs

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/etcdkit/etcdkit/internal/reload"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/internal/xfer"
)

func init() {
	store.Register("gs", open)
}

// Config describes a GCS store.
type Config struct {
	Bucket string
	// Prefix every key is stored under; "" means the bucket's root.
	Prefix string
	// Endpoint of the JSON API's host, such as an emulator's
	// http://127.0.0.1:4443; "" means Google, or the storageAPIEndpoint
	// file beside the credentials, or GOOGLE_STORAGE_API_ENDPOINT.
	Endpoint string
	// CredentialsFile is a service-account key file; "" means
	// GOOGLE_APPLICATION_CREDENTIALS or the other application default
	// credentials. A plain-HTTP Endpoint without credentials is taken for
	// an emulator and used without authentication.
	CredentialsFile string
	// Lock, when set, gives every object the store writes an object
	// retention of Lock.For from its upload ("Unlocked", which a user
	// with storage.objects.overrideUnlockedRetention may lift, or
	// "Locked" for compliance); the bucket must have object retention on.
	// URL: ?lock-for=72h&lock-mode=.
	Lock store.Lock
	// Options tune transfers and carry the logger.
	Options store.Options
}

// Store is a GCS bucket (or a prefix of one).
type Store struct {
	cfg    Config
	loc    store.Location
	client *storage.Client
	bucket *storage.BucketHandle
	// lockable: the bucket has a retention policy or object retention,
	// so an object may be locked.
	lockable bool
}

func open(ctx context.Context, u *url.URL, opts store.Options) (store.Store, error) {
	loc, q, err := store.ParseLocation(u, "bucket")
	if err != nil {
		return nil, err
	}
	opts.EnvPrefix = q.Get("env-prefix")
	lock, err := store.ParseLock(loc, q)
	if err != nil {
		return nil, err
	}
	cfg := Config{Bucket: loc.Bucket, Prefix: loc.Prefix, Endpoint: q.Get("endpoint"), Lock: lock, Options: opts}
	if err := q.Unused(); err != nil {
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	return store.Opened(New(ctx, cfg))
}

// New opens the bucket of cfg and checks that it exists and that the
// credentials may use it.
func New(ctx context.Context, cfg Config) (*Store, error) {
	loc, err := store.NewLocation("gs", cfg.Bucket, cfg.Prefix, "bucket")
	if err != nil {
		return nil, err
	}
	cfg.Prefix = loc.Prefix
	cfg.Options = cfg.Options.WithDefaults()
	s := &Store{cfg: cfg, loc: loc}
	opts, credFile, err := s.clientOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.loc, err)
	}
	s.client, err = storage.NewClient(ctx, opts...)
	if err != nil && credFile != "" {
		return nil, fmt.Errorf("store %s: %w: the credentials in %s: %w", s.loc, store.ErrAccessDenied, credFile, err)
	}
	if err != nil {
		return nil, s.fail("open", "", err)
	}
	s.client.SetRetry(
		// Every write here replaces a whole object and a delete of a
		// deleted object is not an error, so retrying them is safe.
		storage.WithPolicy(storage.RetryAlways),
		storage.WithBackoff(gax.Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2}),
		storage.WithMaxAttempts(6),
	)
	s.bucket = s.client.Bucket(cfg.Bucket)
	attrs, err := s.bucket.Attrs(ctx)
	if err != nil {
		_ = s.client.Close()
		return nil, s.fail("open", "", err)
	}
	s.lockable = attrs.RetentionPolicy != nil || attrs.ObjectRetentionMode == "Enabled"
	if cfg.Lock.For > 0 && attrs.ObjectRetentionMode != "Enabled" {
		_ = s.client.Close()
		return nil, store.BadURL(fmt.Errorf("store %s: lock-for: bucket %q has no object retention (it is turned on at the bucket's creation, --enable-per-object-retention)", s.loc, cfg.Bucket))
	}
	return s, nil
}

// clientOptions returns the options of the storage client and the
// credentials file it uses, if any.
func (s *Store) clientOptions(ctx context.Context) ([]option.ClientOption, string, error) {
	credFile := s.cfg.CredentialsFile
	adc := false
	if credFile == "" {
		env := s.cfg.Options.EnvPrefix + "GOOGLE_APPLICATION_CREDENTIALS"
		credFile = os.Getenv(env)
		if _, err := os.Stat(credFile); credFile != "" && errors.Is(err, fs.ErrNotExist) {
			// etcd-druid sets the variable where no secret is mounted
			// (workload identity): the default credentials answer, and the
			// variable must not reach the SDK, which would fail on it.
			s.cfg.Options.Logger.Info("the credential file a variable names is absent: the default credentials are used (workload identity, metadata server, gcloud's)",
				"variable", env, "path", credFile)
			credFile, adc = "", true
		}
	}
	if credFile != "" {
		// etcd-backup-restore mounts the secret as a directory: a service
		// account's key, or workload identity federation's configuration.
		if st, err := os.Stat(credFile); err == nil && st.IsDir() {
			dir := credFile
			credFile = filepath.Join(dir, "serviceaccount.json")
			if _, err := os.Stat(credFile); errors.Is(err, fs.ErrNotExist) {
				if _, err := os.Stat(filepath.Join(dir, "credentialsConfig")); err == nil {
					credFile = filepath.Join(dir, "credentialsConfig")
				}
			}
		}
	}
	endpoint := s.cfg.Endpoint
	if endpoint == "" && credFile != "" {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(credFile), "storageAPIEndpoint"))
		if err == nil {
			endpoint = strings.TrimSpace(string(data))
		}
	}
	if endpoint == "" {
		endpoint = strings.TrimSpace(os.Getenv("GOOGLE_STORAGE_API_ENDPOINT"))
	}

	var opts, auth []option.ClientOption
	switch {
	case credFile != "":
		ts, err := rotatingTokens(credFile, s.cfg.Options.Logger)
		if err != nil {
			return nil, "", fmt.Errorf("%w: the credentials file: %w (check GOOGLE_APPLICATION_CREDENTIALS)", store.ErrAccessDenied, err)
		}
		auth = append(auth, option.WithTokenSource(ts))
	case strings.HasPrefix(endpoint, "http://"):
		auth = append(auth, option.WithoutAuthentication())
	case adc:
		a, err := defaultsWithoutEnv()
		if err != nil {
			return nil, "", err
		}
		auth = append(auth, a)
	}
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(endpoint, "/")+"/storage/v1/"), storage.WithJSONReads())
	}
	if s.cfg.Options.Transport == nil {
		return append(opts, auth...), credFile, nil
	}
	// A caller's transport still carries the credentials: wrap it.
	base := s.cfg.Options.Transport
	if anonymous := len(auth) == 1 && credFile == "" && !adc; !anonymous {
		rt, err := htransport.NewTransport(ctx, base, append(auth, option.WithScopes(storage.ScopeFullControl))...)
		if err != nil {
			return nil, "", fmt.Errorf("%w: the credentials in %s: %w", store.ErrAccessDenied, cmp.Or(credFile, "the application default credentials"), err)
		}
		base = rt
	}
	return append(opts, option.WithHTTPClient(&http.Client{Transport: base})), credFile, nil
}

// credentialsType is the kind of credentials file path is, by its "type":
// a service account's key, workload identity federation's
// external_account, and the others Google's tools write.
func credentialsType(path string) (option.CredentialsType, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", fmt.Errorf("%s is not a JSON credentials file: %w", path, err)
	}
	for _, k := range []option.CredentialsType{option.ServiceAccount, option.ExternalAccount, option.AuthorizedUser, option.ImpersonatedServiceAccount} {
		if f.Type == string(k) {
			return k, nil
		}
	}
	return "", fmt.Errorf("%s is of type %q: service_account, external_account, authorized_user or impersonated_service_account", path, f.Type)
}

// rotatingTokens are the tokens of a credentials file, its credentials
// made again when the file changes: a rotated key is used from the next
// token on, without a restart (an external_account's subject token file
// is read at each exchange anyway).
func rotatingTokens(path string, log *slog.Logger) (oauth2.TokenSource, error) {
	f := reload.New(func() (oauth2.TokenSource, error) {
		kind, err := credentialsType(path)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if kind == option.ServiceAccount {
			// Checked now: the SDK parses it at the first token.
			if err := checkPrivateKey(b); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		creds, err := google.CredentialsFromJSONWithType(context.Background(), b, google.CredentialsType(kind), storage.ScopeFullControl)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return oauth2.ReuseTokenSource(nil, creds.TokenSource), nil
	}, log, path)
	if _, err := f.Get(); err != nil {
		return nil, err
	}
	return reloadedTokens{f}, nil
}

// checkPrivateKey says why a service account's key cannot sign.
func checkPrivateKey(b []byte) error {
	var f struct {
		PrivateKey string `json:"private_key"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	block, _ := pem.Decode([]byte(f.PrivateKey))
	if block == nil {
		return errors.New("its private_key is not PEM")
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		if _, err1 := x509.ParsePKCS1PrivateKey(block.Bytes); err1 != nil {
			return fmt.Errorf("its private_key: %w", err)
		}
	}
	return nil
}

type reloadedTokens struct {
	f *reload.File[oauth2.TokenSource]
}

func (r reloadedTokens) Token() (*oauth2.Token, error) {
	ts, err := r.f.Get()
	if err != nil {
		return nil, err
	}
	return ts.Token()
}

// defaultsWithoutEnv are the application default credentials without
// GOOGLE_APPLICATION_CREDENTIALS: gcloud's file when there is one, else
// the metadata server's tokens (GKE's workload identity, GCE).
func defaultsWithoutEnv() (option.ClientOption, error) {
	metadata := option.WithTokenSource(google.ComputeTokenSource("", storage.ScopeFullControl))
	dir := os.Getenv("CLOUDSDK_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return metadata, nil //nolint:nilerr // no home, no gcloud file: the metadata server
		}
		dir = filepath.Join(home, ".config", "gcloud")
	}
	file := filepath.Join(dir, "application_default_credentials.json")
	if _, err := os.Stat(file); err != nil {
		return metadata, nil //nolint:nilerr // no gcloud file: the metadata server
	}
	kind, err := credentialsType(file)
	if err != nil {
		return nil, fmt.Errorf("%w: gcloud's credentials: %w", store.ErrAccessDenied, err)
	}
	return option.WithAuthCredentialsFile(kind, file), nil
}

func (s *Store) String() string { return s.loc.String() }

func (s *Store) object(key string) (*storage.ObjectHandle, error) {
	name, err := s.loc.Object(key)
	if err != nil {
		return nil, err
	}
	return s.bucket.Object(name), nil
}

// chunkSize is PartSize rounded up to the 256 KiB multiple GCS requires.
func (s *Store) chunkSize() int {
	const unit = 256 << 10
	return int((s.cfg.Options.PartSize + unit - 1) / unit * unit)
}

// Put streams r through a resumable upload on the condition that the
// object does not exist (generation 0): GCS applies it when the upload is
// finalized, so an object that exists, or another writer's upload that
// finalized first, fails it (412). Cancelling the writer's context is how
// an upload is abandoned: the object is then never created.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.If(storage.Conditions{DoesNotExist: true}).NewWriter(wctx)
	w.Retention = s.retention()
	w.ChunkSize = s.chunkSize()
	w.ChunkRetryDeadline = 2 * time.Minute
	if _, err := io.Copy(w, xfer.ContextReader(ctx, r)); err != nil {
		cancel()
		_ = w.Close()
		return s.fail("put", key, err)
	}
	if err := w.Close(); err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

// Get reads small objects in one request and larger ones in parallel
// ranges, all of the generation found first, so an object replaced while
// it is read fails instead of mixing two versions.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := s.object(key)
	if err != nil {
		return nil, err
	}
	attrs, err := obj.Attrs(ctx)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	obj = obj.Generation(attrs.Generation)
	if attrs.Size <= s.cfg.Options.PartSize {
		r, err := obj.NewReader(ctx)
		if err != nil {
			return nil, s.fail("get", key, err)
		}
		return r, nil
	}
	return xfer.Ranged{
		Size:        attrs.Size,
		PartSize:    s.cfg.Options.PartSize,
		Concurrency: s.cfg.Options.Concurrency,
		Retries:     3,
		Logger:      s.cfg.Options.Logger,
		Name:        s.loc.String() + "/" + key,
		Open: func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
			r, err := obj.NewRangeReader(ctx, off, n)
			if err != nil {
				return nil, s.fail("get", key, err)
			}
			return r, nil
		},
	}.Reader(ctx), nil
}

func (s *Store) List(ctx context.Context, prefix string) ([]store.Object, error) {
	objs, _, err := s.list(ctx, prefix)
	return objs, err
}

// ListExcluded lists the objects whose metadata carries ExcludeTag=true
// (store.ExcludedLister).
func (s *Store) ListExcluded(ctx context.Context, prefix string) ([]store.Object, error) {
	_, excluded, err := s.list(ctx, prefix)
	return excluded, err
}

var _ store.ExcludedLister = (*Store)(nil)

// list lists the objects under prefix, apart those an operator took out
// of the backups with ExcludeTag, as etcd-backup-restore reads it.
func (s *Store) list(ctx context.Context, prefix string) (objs, excluded []store.Object, err error) {
	full, err := s.loc.ListPrefix(prefix)
	if err != nil {
		return nil, nil, err
	}
	q := &storage.Query{Prefix: full}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated", "Metadata"}); err != nil {
		return nil, nil, fmt.Errorf("store %s: %w", s.loc, err)
	}
	it := s.bucket.Objects(ctx, q)
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return objs, excluded, nil
		}
		if err != nil {
			return nil, nil, s.fail("list", prefix, err)
		}
		o := store.Object{Key: s.loc.Key(a.Name), Size: a.Size, Modified: a.Updated}
		if a.Metadata[store.ExcludeTag] == "true" {
			excluded = append(excluded, o)
			continue
		}
		objs = append(objs, o)
	}
}

func (s *Store) Delete(ctx context.Context, key string) error {
	obj, err := s.object(key)
	if err != nil {
		return err
	}
	if err := obj.Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return s.fail("delete", key, err)
	}
	return nil
}

// fail wraps err with the store and the operation, and with the store
// error a caller can match, plus what to do about it.
func (s *Store) fail(op, key string, err error) error {
	what := op
	if key != "" {
		what += " " + key
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrAccessDenied) || errors.Is(err, store.ErrBucketNotFound) {
		return err // classified already, by a range opener
	}
	var ge *googleapi.Error
	code := 0
	if errors.As(err, &ge) {
		code = ge.Code
	}
	locked := lockRefused(err)
	switch {
	case op == "put" && locked:
		// A lock refuses a create only where an object is.
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrExists)
	case locked:
		return fmt.Errorf("store %s: %s: %w: %w", s.loc, what, store.ErrLocked, err)
	case errors.Is(err, storage.ErrBucketNotExist) || op == "open" && code == http.StatusNotFound:
		return fmt.Errorf("store %s: %s: %w: bucket %q (create it, or fix the bucket of the store URL): %w",
			s.loc, what, store.ErrBucketNotFound, s.cfg.Bucket, err)
	case errors.Is(err, storage.ErrObjectNotExist):
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrNotFound)
	case op == "put" && code == http.StatusPreconditionFailed:
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrExists)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("store %s: %s: %w: check the credentials (GOOGLE_APPLICATION_CREDENTIALS or the workload identity) and their permissions on bucket %q: %w",
			s.loc, what, store.ErrAccessDenied, s.cfg.Bucket, err)
	}
	return fmt.Errorf("store %s: %s: %w", s.loc, what, err)
}

// lockRefused says whether err is GCS refusing to delete or replace an
// object a retention policy, an object retention or a hold keeps: a 403
// whose message says so ("Object '…' is subject to bucket's retention
// policy and cannot be deleted, overwritten or archived until …", "…
// is under active Temporary hold …"); GCS gives no reason code of its
// own for it.
func lockRefused(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != http.StatusForbidden {
		return false
	}
	msg := strings.ToLower(ge.Message)
	return strings.Contains(msg, "retention") || strings.Contains(msg, "hold")
}
