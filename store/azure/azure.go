package azure

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etcdkit/etcdkit/internal/reload"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/internal/credfile"
	"github.com/etcdkit/etcdkit/store/internal/xfer"
)

func init() {
	store.Register("azblob", open)
}

// Config describes an Azure Blob Storage store. Empty credential fields
// are looked up as the package documentation says.
type Config struct {
	Container string
	// Prefix every key is stored under; "" means the container's root.
	Prefix string
	// Account is the storage account name.
	Account string
	// Endpoint is the blob service URL, such as an emulator's
	// http://127.0.0.1:10000/devstoreaccount1; "" means
	// https://<account>.blob.core.windows.net.
	Endpoint string
	// AccountKey is the shared key of the account.
	AccountKey string
	// ConnectionString, when set, gives account, key and endpoint at once.
	ConnectionString string
	// Lock, when set, gives every blob the store writes a version-level
	// immutability policy of Lock.For from its upload ("Unlocked", or
	// "Locked" for compliance); the container must have version-level
	// immutability on. URL: ?lock-for=72h&lock-mode=.
	Lock store.Lock
	// Options tune transfers and carry the logger.
	Options store.Options
}

// Store is an Azure blob container (or a prefix of one).
type Store struct {
	cfg       Config
	loc       store.Location
	container *container.Client
	// versionLocks: the container has version-level immutability, so a
	// blob may carry a policy of its own.
	versionLocks bool
}

func open(ctx context.Context, u *url.URL, opts store.Options) (store.Store, error) {
	loc, q, err := store.ParseLocation(u, "container")
	if err != nil {
		return nil, err
	}
	opts.EnvPrefix = q.Get("env-prefix")
	lock, err := store.ParseLock(loc, q)
	if err != nil {
		return nil, err
	}
	cfg := Config{Container: loc.Bucket, Prefix: loc.Prefix, Account: q.Get("account"), Endpoint: q.Get("endpoint"), Lock: lock, Options: opts}
	if err := q.Unused(); err != nil {
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	return store.Opened(New(ctx, cfg))
}

// New opens the container of cfg and checks that it exists and that the
// credentials may use it.
func New(ctx context.Context, cfg Config) (*Store, error) {
	loc, err := store.NewLocation("azblob", cfg.Container, cfg.Prefix, "container")
	if err != nil {
		return nil, err
	}
	cfg.Prefix = loc.Prefix
	cfg.Options = cfg.Options.WithDefaults()
	s := &Store{cfg: cfg, loc: loc}
	client, err := s.newClient()
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.loc, err)
	}
	s.container = client
	props, err := s.container.GetProperties(ctx, nil)
	if err != nil {
		return nil, s.fail("open", "", err)
	}
	s.versionLocks = props.IsImmutableStorageWithVersioningEnabled != nil && *props.IsImmutableStorageWithVersioningEnabled
	if cfg.Lock.For > 0 && !s.versionLocks {
		return nil, store.BadURL(fmt.Errorf("store %s: lock-for: container %q has no version-level immutability (turn it on for the container or its account)", s.loc, cfg.Container))
	}
	return s, nil
}

func (s *Store) clientOptions() *container.ClientOptions {
	o := &container.ClientOptions{}
	o.Retry = policy.RetryOptions{
		MaxRetries:    5,
		RetryDelay:    200 * time.Millisecond,
		MaxRetryDelay: 10 * time.Second,
		// A block of PartSize bytes must fit in one try on a slow link.
		TryTimeout: 5 * time.Minute,
	}
	if s.cfg.Options.Transport != nil {
		o.Transport = &http.Client{Transport: s.cfg.Options.Transport}
	}
	return o
}

// rotatedKey sets the shared key to the credential file's before each
// call; the file is read again only when it changed (reload).
type rotatedKey struct {
	keys *reload.File[credfile.Fields]
	cred *container.SharedKeyCredential
}

func (r rotatedKey) Do(req *policy.Request) (*http.Response, error) {
	f, err := r.keys.Get()
	if err != nil {
		return nil, err
	}
	if err := r.cred.SetAccountKey(f["storageKey"]); err != nil {
		return nil, fmt.Errorf("%w: the rotated storageKey: %w", store.ErrAccessDenied, err)
	}
	return req.Next()
}

// newClient finds the credentials and the service URL.
func (s *Store) newClient() (*container.Client, error) {
	opts := s.clientOptions()
	if cs := cmp.Or(s.cfg.ConnectionString, os.Getenv("AZURE_STORAGE_CONNECTION_STRING")); cs != "" {
		c, err := container.NewClientFromConnectionString(cs, s.cfg.Container, opts)
		if err != nil {
			return nil, fmt.Errorf("%w: the connection string: %w", store.ErrAccessDenied, err)
		}
		return c, nil
	}
	domain, emulator := "", false
	// keys, when the key came from a credential file: it is read again
	// before each call, so a rotated key is used without a restart.
	var keys *reload.File[credfile.Fields]
	if s.cfg.AccountKey == "" {
		w, from, err := credfile.Watch(s.cfg.Options.Logger, s.cfg.Options.EnvPrefix+"AZURE_APPLICATION_CREDENTIALS_JSON", s.cfg.Options.EnvPrefix+"AZURE_APPLICATION_CREDENTIALS")
		if err != nil {
			return nil, err
		}
		if w != nil {
			fields, err := w.Get()
			if err != nil {
				return nil, err
			}
			keys = w
			s.cfg.Account = cmp.Or(s.cfg.Account, fields["storageAccount"])
			s.cfg.AccountKey = fields["storageKey"]
			domain = fields["domain"]
			if emulator, err = fields.Bool("emulatorEnabled"); err != nil {
				return nil, fmt.Errorf("%s: %w", from, err)
			}
			if s.cfg.AccountKey == "" {
				return nil, fmt.Errorf("%w: %s has no storageKey", store.ErrAccessDenied, from)
			}
		} else {
			s.cfg.AccountKey = os.Getenv("AZURE_STORAGE_KEY")
		}
	}
	if s.cfg.Account == "" {
		s.cfg.Account = os.Getenv("AZURE_STORAGE_ACCOUNT")
	}
	endpoint := s.cfg.Endpoint
	switch {
	case endpoint != "":
	case emulator && os.Getenv("AZURE_STORAGE_API_ENDPOINT") != "":
		endpoint = strings.TrimSuffix(os.Getenv("AZURE_STORAGE_API_ENDPOINT"), "/") + "/" + s.cfg.Account
	case s.cfg.Account == "":
		return nil, errors.New("no storage account: add ?account=<name> to the store URL, or set AZURE_STORAGE_ACCOUNT")
	default:
		endpoint = fmt.Sprintf("https://%s.blob.%s", s.cfg.Account, cmp.Or(domain, "core.windows.net"))
	}
	containerURL := strings.TrimSuffix(endpoint, "/") + "/" + s.cfg.Container

	if s.cfg.AccountKey != "" {
		if s.cfg.Account == "" {
			return nil, errors.New("a storage key without an account: add ?account=<name> to the store URL")
		}
		cred, err := container.NewSharedKeyCredential(s.cfg.Account, s.cfg.AccountKey)
		if err != nil {
			return nil, fmt.Errorf("%w: the shared key of account %s: %w", store.ErrAccessDenied, s.cfg.Account, err)
		}
		if keys != nil {
			opts.PerCallPolicies = append(opts.PerCallPolicies, rotatedKey{keys: keys, cred: cred})
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
	}
	dopts := &azidentity.DefaultAzureCredentialOptions{ClientOptions: opts.ClientOptions}
	if host := os.Getenv("AZURE_AUTHORITY_HOST"); host != "" && !publicAuthority(host) {
		// A private or disconnected cloud's Entra (Azure Stack, a
		// sovereign installation) is used as it is: Microsoft's public
		// instance discovery would not know it, or not be reachable.
		dopts.DisableInstanceDiscovery = true
	}
	cred, err := azidentity.NewDefaultAzureCredential(dopts)
	if err != nil {
		return nil, fmt.Errorf("%w: no usable Azure credential: %w", store.ErrAccessDenied, err)
	}
	return container.NewClient(containerURL, cred, opts)
}

// publicAuthority says whether host is the Entra of one of Azure's public
// clouds, which instance discovery knows.
func publicAuthority(host string) bool {
	for _, c := range []cloud.Configuration{cloud.AzurePublic, cloud.AzureChina, cloud.AzureGovernment} {
		if strings.TrimSuffix(host, "/") == strings.TrimSuffix(c.ActiveDirectoryAuthorityHost, "/") {
			return true
		}
	}
	return false
}

func (s *Store) String() string { return s.loc.String() }

// Put sends an object of up to PartSize bytes in one request, and a larger
// createOnly is the condition of every upload and block list commit:
// If-None-Match: *, so an existing blob is never replaced and of two
// writers committing at once one wins.
var createOnly = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}}

// one as blocks staged in parallel and committed at the end.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	name, err := s.loc.Object(key)
	if err != nil {
		return err
	}
	bb := s.container.NewBlockBlobClient(name)
	mode, until := s.lock()
	src := xfer.ContextReader(ctx, r)
	size := s.cfg.Options.PartSize

	first := make([]byte, size)
	n, err := io.ReadFull(src, first)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		_, err = bb.Upload(ctx, streaming.NopCloser(bytes.NewReader(first[:n])), &blockblob.UploadOptions{AccessConditions: createOnly,
			ImmutabilityPolicyMode: mode, ImmutabilityPolicyExpiryTime: until})
		if err != nil {
			return s.fail("put", key, err)
		}
		return nil
	case err != nil:
		return s.fail("put", key, err)
	}

	// Block IDs carry a tag of this upload, so that two uploads of one key
	// never commit each other's blocks.
	var tag [8]byte
	_, _ = rand.Read(tag[:])
	blockID := func(i int) string {
		return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s-%08d", hex.EncodeToString(tag[:]), i))
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Concurrency buffers circulate, the first one among them: staged
	// blocks return theirs, the reader waits for one to fill it.
	pool := make(chan []byte, s.cfg.Options.Concurrency)
	for range s.cfg.Options.Concurrency - 1 {
		pool <- nil
	}
	var (
		wg  sync.WaitGroup
		ids []string
	)
	stage := func(i int, buf []byte) {
		defer wg.Done()
		_, err := bb.StageBlock(ctx, blockID(i), streaming.NopCloser(bytes.NewReader(buf)), nil)
		if err != nil {
			cancel(err)
		}
		pool <- buf[:cap(buf)]
	}
	buf := first
	for i := 0; ; i++ {
		ids = append(ids, blockID(i))
		wg.Add(1)
		go stage(i, buf[:n])

		select {
		case buf = <-pool:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		if buf == nil {
			buf = make([]byte, size)
		}
		n, err = io.ReadFull(src, buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			cancel(err)
			break
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			i++
			ids = append(ids, blockID(i))
			wg.Add(1)
			go stage(i, buf[:n])
			break
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return s.fail("put", key, err)
	}
	if _, err := bb.CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{AccessConditions: createOnly,
		ImmutabilityPolicyMode: mode, ImmutabilityPolicyExpiryTime: until}); err != nil {
		return s.fail("put", key, err)
	}
	return nil
}

// Get reads small objects in one request and larger ones in parallel
// ranges, all of the ETag found first, so an object replaced while it is
// read fails instead of mixing two versions.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	name, err := s.loc.Object(key)
	if err != nil {
		return nil, err
	}
	bc := s.container.NewBlobClient(name)
	props, err := bc.GetProperties(ctx, nil)
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	size := *props.ContentLength
	cond := &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: props.ETag}}
	openRange := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		resp, err := bc.DownloadStream(ctx, &blob.DownloadStreamOptions{
			Range:            blob.HTTPRange{Offset: off, Count: n},
			AccessConditions: cond,
		})
		if err != nil {
			return nil, s.fail("get", key, err)
		}
		return resp.Body, nil
	}
	if size <= s.cfg.Options.PartSize {
		return openRange(ctx, 0, 0) // Count 0 is the whole blob
	}
	return xfer.Ranged{
		Size:        size,
		PartSize:    s.cfg.Options.PartSize,
		Concurrency: s.cfg.Options.Concurrency,
		Retries:     3,
		Logger:      s.cfg.Options.Logger,
		Name:        s.loc.String() + "/" + key,
		Open:        openRange,
	}.Reader(ctx), nil
}

func (s *Store) List(ctx context.Context, prefix string) ([]store.Object, error) {
	objs, _, err := s.list(ctx, prefix)
	return objs, err
}

// ListExcluded lists the blobs whose index tag ExcludeTag is "true"
// (store.ExcludedLister).
func (s *Store) ListExcluded(ctx context.Context, prefix string) ([]store.Object, error) {
	_, excluded, err := s.list(ctx, prefix)
	return excluded, err
}

var _ store.ExcludedLister = (*Store)(nil)

// list lists the blobs under prefix, apart those an operator took out of
// the backups (excluded).
func (s *Store) list(ctx context.Context, prefix string) (objs, out []store.Object, err error) {
	full, err := s.loc.ListPrefix(prefix)
	if err != nil {
		return nil, nil, err
	}
	pager := s.container.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &full, Include: container.ListBlobsInclude{Tags: true}})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, nil, s.fail("list", prefix, err)
		}
		for _, b := range page.Segment.BlobItems {
			o := store.Object{Key: s.loc.Key(*b.Name)}
			if p := b.Properties; p != nil {
				if p.ContentLength != nil {
					o.Size = *p.ContentLength
				}
				if p.LastModified != nil {
					o.Modified = *p.LastModified
				}
			}
			if excluded(b) {
				out = append(out, o)
				continue
			}
			objs = append(objs, o)
		}
	}
	return objs, out, nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	name, err := s.loc.Object(key)
	if err != nil {
		return err
	}
	include := blob.DeleteSnapshotsOptionTypeInclude
	_, err = s.container.NewBlobClient(name).Delete(ctx, &blob.DeleteOptions{DeleteSnapshots: &include})
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
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
	status := 0
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		status = re.StatusCode
	}
	// An immutability policy (time-based retention) or a legal hold
	// refuses with 409 BlobImmutableDueToPolicy.
	locked := bloberror.HasCode(err, bloberror.BlobImmutableDueToPolicy)
	switch {
	case op == "put" && locked:
		// A lock refuses a create only where an object is.
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrExists)
	case locked:
		return fmt.Errorf("store %s: %s: %w: %w", s.loc, what, store.ErrLocked, err)
	case bloberror.HasCode(err, bloberror.ContainerNotFound) || op == "open" && status == http.StatusNotFound:
		return fmt.Errorf("store %s: %s: %w: container %q of account %s (create it, or fix the container of the store URL): %w",
			s.loc, what, store.ErrBucketNotFound, s.cfg.Container, s.cfg.Account, err)
	case op == "put" && (bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) || status == http.StatusPreconditionFailed):
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrExists)
	case bloberror.HasCode(err, bloberror.BlobNotFound) || status == http.StatusNotFound:
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrNotFound)
	case bloberror.HasCode(err, bloberror.AuthenticationFailed, bloberror.AuthorizationFailure,
		bloberror.AuthorizationPermissionMismatch, bloberror.InsufficientAccountPermissions) || status == http.StatusForbidden:
		return fmt.Errorf("store %s: %s: %w: check the credentials (AZURE_APPLICATION_CREDENTIALS[_JSON], AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY or the managed identity) and their rights on container %q: %w",
			s.loc, what, store.ErrAccessDenied, s.cfg.Container, err)
	}
	return fmt.Errorf("store %s: %s: %w", s.loc, what, err)
}

// excluded says whether an operator took the blob out of the backups with
// the index tag store.ExcludeTag=true, as etcd-backup-restore reads it.
func excluded(b *container.BlobItem) bool {
	if b.BlobTags == nil {
		return false
	}
	for _, t := range b.BlobTags.BlobTagSet {
		if t != nil && t.Key != nil && t.Value != nil && *t.Key == store.ExcludeTag && *t.Value == "true" {
			return true
		}
	}
	return false
}
