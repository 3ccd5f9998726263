package s3

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/internal/credfile"
	"github.com/etcdkit/etcdkit/store/internal/xfer"
)

func init() {
	store.Register("s3", open)
}

// Config describes an S3 store. Fields left empty come from the
// etcd-backup-restore credential file (AWS_APPLICATION_CREDENTIALS_JSON or
// AWS_APPLICATION_CREDENTIALS) when one is set, and otherwise from the AWS
// SDK's default chain (environment, shared config, web identity, instance
// role).
type Config struct {
	Bucket string
	// Prefix every key is stored under; "" means the bucket's root.
	Prefix string
	// Region of the bucket; "" means from the credentials or the SDK, and
	// us-east-1 for an S3-compatible Endpoint that names none.
	Region string
	// Endpoint of an S3-compatible server; "" means AWS.
	Endpoint string
	// PathStyle addresses the bucket in the URL path instead of the host
	// name, which most S3-compatible servers need.
	PathStyle bool
	// AccessKeyID and SecretAccessKey, when set, are used instead of any
	// other credentials.
	AccessKeyID, SecretAccessKey string
	// KMSKeyID, when set, has S3 encrypt each object with this KMS key
	// (SSE-KMS); reads need nothing more. "": the bucket's default.
	KMSKeyID string
	// Provider names an S3-compatible service whose credentials
	// etcd-backup-restore reads its own way: "ecs" (Dell ECS: ECS_ENDPOINT,
	// ECS_ACCESS_KEY_ID, … in the environment), "ocs" (OpenShift Container
	// Storage: OPENSHIFT_APPLICATION_CREDENTIALS[_JSON]) or "oss" (Alibaba
	// OSS through its S3-compatible API: ALICLOUD_APPLICATION_CREDENTIALS
	// [_JSON]). "": AWS's (AWS_APPLICATION_CREDENTIALS[_JSON]).
	Provider string
	// Lock, when set, locks every object the store writes for Lock.For
	// from its upload (S3 Object Lock retention; the bucket must have
	// Object Lock on), in governance mode (a user with
	// s3:BypassGovernanceRetention may still delete) or compliance (no
	// one may, root included, until it ends). URL: ?lock-for=72h&lock-mode=.
	Lock store.Lock
	// Options tune transfers and carry the logger.
	Options store.Options
}

const minPartSize = 5 << 20

// Store is an S3 bucket (or a prefix of one).
type Store struct {
	cfg    Config
	loc    store.Location
	client *s3.Client
	tm     *transfermanager.Client
	// noConditional: the server answered If-None-Match with 501.
	noConditional atomic.Bool
	// sse is the customer key every object is written and read with;
	// zero: none.
	sse sseC
	// versions is set when the bucket keeps versions (versions.go).
	versions *versions
	// objectLock: the bucket has Object Lock; uploads carry checksums.
	objectLock bool
	// defaultRetention is the Object Lock default of the bucket; zero:
	// none.
	defaultRetention time.Duration
}

func open(ctx context.Context, u *url.URL, opts store.Options) (store.Store, error) {
	loc, q, err := store.ParseLocation(u, "bucket")
	if err != nil {
		return nil, err
	}
	pathStyle, err := q.Bool("path-style")
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	opts.EnvPrefix = q.Get("env-prefix")
	lock, err := store.ParseLock(loc, q)
	if err != nil {
		return nil, err
	}
	cfg := Config{
		Lock:      lock,
		Bucket:    loc.Bucket,
		Prefix:    loc.Prefix,
		Region:    q.Get("region"),
		Endpoint:  q.Get("endpoint"),
		PathStyle: pathStyle,
		Provider:  q.Get("provider"),
		KMSKeyID:  q.Get("sse-kms-key-id"),
		Options:   opts,
	}
	if err := q.Unused(); err != nil {
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	return store.Opened(New(ctx, cfg))
}

// New opens the bucket of cfg and checks that it exists and that the
// credentials may use it, so that a wrong configuration fails at start
// with a message that says what to fix.
func New(ctx context.Context, cfg Config) (*Store, error) {
	loc, err := store.NewLocation("s3", cfg.Bucket, cfg.Prefix, "bucket")
	if err != nil {
		return nil, err
	}
	cfg.Prefix = loc.Prefix
	cfg.Options = cfg.Options.WithDefaults()
	// S3 refuses parts below 5 MiB, all but the last.
	cfg.Options.PartSize = max(cfg.Options.PartSize, minPartSize)
	s := &Store{cfg: cfg, loc: loc}

	awsCfg, err := s.awsConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.loc, err)
	}
	s.client = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = s.cfg.PathStyle
		if s.cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.cfg.Endpoint)
		}
		// S3-compatible servers reject the CRC trailers newer SDKs add to
		// every upload; send checksums only where the API requires them.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	s.tm = s.transferManager(aws.RequestChecksumCalculationWhenRequired)

	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(cfg.Bucket)}); err != nil {
		return nil, s.fail("open", "", err)
	}
	s.inspectBucket(ctx)
	if cfg.Lock.For > 0 && !s.objectLock {
		return nil, store.BadURL(fmt.Errorf("store %s: lock-for: bucket %q has no Object Lock (it is turned on at the bucket's creation; GetBucketVersioning and GetObjectLockConfiguration must be allowed)", s.loc, cfg.Bucket))
	}
	return s, nil
}

// transferManager uploads through s.client with the store's parts.
func (s *Store) transferManager(checksums aws.RequestChecksumCalculation) *transfermanager.Client {
	o := s.cfg.Options
	return transfermanager.New(s.client, func(t *transfermanager.Options) {
		t.PartSizeBytes = o.PartSize
		t.MultipartUploadThreshold = o.PartSize
		t.Concurrency = o.Concurrency
		t.RequestChecksumCalculation = checksums
		// Abort a failed multipart upload with a fresh context: the one
		// that failed may be the cancelled one.
		t.FailTimeout = time.Minute
	})
}

// fromFile takes what the configuration leaves unset from the fields of
// etcd-backup-restore's credential file, and the file's server-side
// encryption and TLS settings.
func (s *Store) fromFile(fields credfile.Fields) (*tls.Config, error) {
	var err error
	if s.sse, err = sseFromFields(fields); err != nil {
		return nil, err
	}
	if s.cfg.AccessKeyID == "" {
		s.cfg.AccessKeyID, s.cfg.SecretAccessKey = fields["accessKeyID"], fields["secretAccessKey"]
	}
	if s.cfg.Region == "" {
		s.cfg.Region = fields["region"]
	}
	if s.cfg.Endpoint == "" {
		if s.cfg.Endpoint, err = withScheme(fields["endpoint"], fields); err != nil {
			return nil, err
		}
	}
	if !s.cfg.PathStyle {
		if s.cfg.PathStyle, err = fields.Bool("s3ForcePathStyle"); err != nil {
			return nil, err
		}
	}
	return tlsFromFields(fields)
}

// awsConfig assembles the SDK configuration: the credential file of
// etcd-backup-restore first, explicit fields over both.
func (s *Store) awsConfig(ctx context.Context) (aws.Config, error) {
	var loadOpts []func(*config.LoadOptions) error
	prov, ok := providers[s.cfg.Provider]
	if !ok {
		return aws.Config{}, store.BadURL(fmt.Errorf("provider %q: ecs, ocs or oss (or none, for AWS)", s.cfg.Provider))
	}
	s.cfg.PathStyle = s.cfg.PathStyle || prov.pathStyle
	watched, from, err := prov.watch(s.cfg.Options.Logger, s.cfg.Options.EnvPrefix)
	if err != nil {
		return aws.Config{}, err
	}
	var (
		fields       credfile.Fields
		tlsCfg       *tls.Config
		keysFromFile bool
	)
	if watched != nil {
		if fields, err = watched(); err != nil {
			return aws.Config{}, err
		}
		keysFromFile = s.cfg.AccessKeyID == "" && fields["accessKeyID"] != ""
		if tlsCfg, err = s.fromFile(fields); err != nil {
			return aws.Config{}, fmt.Errorf("%s: %w", from, err)
		}
	}
	if (s.cfg.AccessKeyID == "") != (s.cfg.SecretAccessKey == "") {
		return aws.Config{}, fmt.Errorf("%w: an access key ID without a secret access key, or the reverse (check the credentials in %s)",
			store.ErrAccessDenied, cmp.Or(from, "the configuration"))
	}
	switch {
	case keysFromFile:
		loadOpts = append(loadOpts, config.WithCredentialsProvider(fileKeys{watched}))
	case s.cfg.AccessKeyID != "":
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(s.cfg.AccessKeyID, s.cfg.SecretAccessKey, "")))
	}
	if s.cfg.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(s.cfg.Region))
	}
	loadOpts = append(loadOpts, config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 6
			o.MaxBackoff = 10 * time.Second
		})
	}))
	if tlsCfg != nil {
		loadOpts = append(loadOpts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.TLSClientConfig = tlsCfg
		})))
	}
	loadOpts = append(loadOpts, config.WithLogger(logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		s.cfg.Options.Logger.Debug(fmt.Sprintf(format, v...), "store", s.loc, "sdk", "aws", "class", string(c))
	})))
	awsCfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if s.cfg.Options.Transport != nil {
		// Set after loading: the loader would try to add AWS_CA_BUNDLE to
		// a client it cannot configure.
		awsCfg.HTTPClient = &http.Client{Transport: s.cfg.Options.Transport}
	}
	if role := fields["roleARN"]; role != "" && s.cfg.AccessKeyID == "" {
		// etcd-backup-restore's web identity (IRSA): the token file is
		// read again at each exchange, so a rotated token is the one used.
		tokenPath := fields["tokenPath"]
		if tokenPath == "" {
			return aws.Config{}, fmt.Errorf("%w: %s gives roleARN without tokenPath (or, as a directory, without a file named token)", store.ErrAccessDenied, from)
		}
		awsCfg.Credentials = aws.NewCredentialsCache(stscreds.NewWebIdentityRoleProvider(sts.NewFromConfig(awsCfg), role, stscreds.IdentityTokenFile(tokenPath)))
	}
	if awsCfg.Region == "" {
		if s.cfg.Endpoint == "" {
			return aws.Config{}, errors.New("no region: add ?region=<region> to the store URL, or set AWS_REGION")
		}
		// S3-compatible servers mostly ignore the region, but requests
		// must be signed for one.
		awsCfg.Region = "us-east-1"
	}
	s.cfg.Region = awsCfg.Region
	return awsCfg, nil
}

// fileKeys are the keys of etcd-backup-restore's credential file as it
// is now: rotated on disk, they are used from the next call on, without a
// restart. They expire at once, so the SDK's cache asks again before
// each call; an unchanged file is not read again (reload).
type fileKeys struct {
	fields func() (credfile.Fields, error)
}

func (k fileKeys) Retrieve(context.Context) (aws.Credentials, error) {
	f, err := k.fields()
	if err != nil {
		return aws.Credentials{}, err
	}
	return aws.Credentials{AccessKeyID: f["accessKeyID"], SecretAccessKey: f["secretAccessKey"], Source: "etcd-backup-restore credential file",
		CanExpire: true, Expires: time.Now()}, nil
}

func tlsFromFields(f credfile.Fields) (*tls.Config, error) {
	insecure, err := f.Bool("insecureSkipVerify")
	if err != nil {
		return nil, err
	}
	ca := f["trustedCaCert"]
	if !insecure && ca == "" {
		return nil, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: insecure, MinVersion: tls.VersionTLS12} //nolint:gosec // the operator asked for it in the credential file
	if ca != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ca)) {
			return nil, errors.New("trustedCaCert holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func (s *Store) String() string { return s.loc.String() }

// Put uploads through the SDK's transfer manager: one PutObject below
// PartSize, a multipart upload of parallel parts above it, aborted when the
// source or the context fails. Both carry If-None-Match: *, so S3 refuses
// to replace an object (412) and of two writers completing at once one
// wins (the other gets 409). A server that does not implement the header
// (501) is asked with HEAD first instead, which two writers at once can
// race; that is said once in the log.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	name, err := s.loc.Object(key)
	if err != nil {
		return err
	}
	in := &transfermanager.UploadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(name),
		SSECustomerAlgorithm: s.sse.algorithm, SSECustomerKey: s.sse.key, SSECustomerKeyMD5: s.sse.keyMD5}
	if s.cfg.KMSKeyID != "" {
		in.ServerSideEncryption, in.SSEKMSKeyID = tmtypes.ServerSideEncryptionAwsKms, aws.String(s.cfg.KMSKeyID)
	}
	if mode, until := s.lock(); until != nil {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = tmtypes.ObjectLockMode(mode), until
	}
	if s.noConditional.Load() {
		if _, err := s.client.HeadObject(ctx, s.head(name)); err == nil {
			return s.fail("put", key, store.ErrExists)
		} else if kind := s.classify(err); !errors.Is(kind, store.ErrNotFound) {
			return s.fail("put", key, err)
		}
	} else {
		in.IfNoneMatch = aws.String("*")
	}
	src := &sourceReader{r: r}
	in.Body = src
	_, err = s.tm.UploadObject(ctx, in)
	if err != nil && in.IfNoneMatch != nil && s.unconditional(err) {
		// Nothing was stored; the source was read, so the caller tries
		// again, and the next Put asks with HEAD.
		s.cfg.Options.Logger.Warn("the S3 server does not implement conditional writes (If-None-Match); objects are checked with HEAD before they are written, which two writers at once can race",
			"store", s.loc)
	}
	if err != nil {
		// The cause is the source's own error when it broke; make sure the
		// caller can match it whatever the SDK wrapped around it.
		if src.err != nil && !errors.Is(err, src.err) {
			err = fmt.Errorf("%w (reading the source: %w)", err, src.err)
		}
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		var mpu interface{ UploadID() string }
		if errors.As(err, &mpu) && mpu.UploadID() != "" {
			s.abortAgain(name, mpu.UploadID())
		}
		return s.fail("put", key, err)
	}
	return nil
}

// unconditional says whether err is a server's refusal of If-None-Match,
// and remembers it.
func (s *Store) unconditional(err error) bool {
	var ae smithy.APIError
	var re *awshttp.ResponseError
	if (errors.As(err, &ae) && ae.ErrorCode() == "NotImplemented") || (errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotImplemented) {
		s.noConditional.Store(true)
		return true
	}
	return false
}

// abortAgain aborts a failed multipart upload a few more times over a
// second or so. The transfer manager aborted it already, but a part whose
// body had reached the server before the abort may still be written after
// it and bring the upload back (S3 documents this race); the upload would
// then hold storage forever without ever being listed.
func (s *Store) abortAgain(name, uploadID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, wait := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		time.Sleep(wait)
		_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(s.cfg.Bucket), Key: aws.String(name), UploadId: aws.String(uploadID),
		})
		var ae smithy.APIError
		gone := errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload"
		if err != nil && !gone {
			s.cfg.Options.Logger.Warn("abort of a failed multipart upload failed; a bucket lifecycle rule for incomplete uploads removes it later",
				"store", s.loc, "key", name, "upload", uploadID, "err", err)
		}
	}
}

// sourceReader remembers the error the caller's reader returned.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

// head asks for object name, with the customer key it was written with.
func (s *Store) head(name string) *s3.HeadObjectInput {
	return &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(name),
		SSECustomerAlgorithm: s.sse.algorithm, SSECustomerKey: s.sse.key, SSECustomerKeyMD5: s.sse.keyMD5}
}

// Get downloads in parallel byte ranges of one ETag, holding at most
// Concurrency parts in memory.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	name, err := s.loc.Object(key)
	if err != nil {
		return nil, err
	}
	hin := s.head(name)
	if s.versions != nil {
		id, err := s.firstVersion(ctx, name)
		if err != nil {
			return nil, s.fail("get", key, err)
		}
		hin.VersionId = aws.String(id)
	}
	head, err := s.client.HeadObject(ctx, hin)
	if err != nil && s.versions != nil && errors.Is(s.classify(err), store.ErrNotFound) && s.versions.forget(name) {
		// The version a listing saw is gone: ask the bucket again.
		return s.Get(ctx, key)
	}
	if err != nil {
		return nil, s.fail("get", key, err)
	}
	size := aws.ToInt64(head.ContentLength)
	open := func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
		in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(name), IfMatch: head.ETag, VersionId: hin.VersionId,
			SSECustomerAlgorithm: s.sse.algorithm, SSECustomerKey: s.sse.key, SSECustomerKeyMD5: s.sse.keyMD5}
		if n > 0 {
			in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
		}
		out, err := s.client.GetObject(ctx, in)
		if err != nil {
			return nil, s.fail("get", key, err)
		}
		return out.Body, nil
	}
	if size <= s.cfg.Options.PartSize {
		return open(ctx, 0, 0)
	}
	return xfer.Ranged{
		Size: size, PartSize: s.cfg.Options.PartSize, Concurrency: s.cfg.Options.Concurrency,
		Retries: 3, Logger: s.cfg.Options.Logger, Name: s.loc.String() + "/" + key, Open: open,
	}.Reader(ctx), nil
}

func (s *Store) List(ctx context.Context, prefix string) ([]store.Object, error) {
	full, err := s.loc.ListPrefix(prefix)
	if err != nil {
		return nil, err
	}
	if s.versions != nil {
		objs, _, err := s.listFirst(ctx, prefix, full)
		return objs, err
	}
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.cfg.Bucket),
		Prefix: aws.String(full),
	})
	var objs []store.Object
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.fail("list", prefix, err)
		}
		for _, o := range page.Contents {
			objs = append(objs, store.Object{
				Key:      s.loc.Key(aws.ToString(o.Key)),
				Size:     aws.ToInt64(o.Size),
				Modified: aws.ToTime(o.LastModified),
			})
		}
	}
	return objs, nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	name, err := s.loc.Object(key)
	if err != nil {
		return err
	}
	if s.versions != nil {
		// A delete without a version would only add a marker.
		return s.deleteVersions(ctx, key, name)
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(name)})
	if err != nil && !errors.Is(s.classify(err), store.ErrNotFound) {
		return s.fail("delete", key, err)
	}
	return nil
}

// classify maps the S3 errors a caller can act on to the store's errors.
func (s *Store) classify(err error) error {
	if credentialsFailed(err) {
		// STS answered and refused (a token or role it does not take);
		// one that did not answer is an outage, not a refusal.
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return store.ErrAccessDenied
		}
		return nil
	}
	code, status := "", 0
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	switch {
	case code == "PreconditionFailed" || code == "ConditionalRequestConflict" || status == http.StatusPreconditionFailed:
		// 412: the object exists; 409 ConditionalRequestConflict: another
		// writer's upload of it is completing, and wins.
		return store.ErrExists
	case code == "NoSuchBucket":
		return store.ErrBucketNotFound
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return store.ErrNotFound
	case code == "AccessDenied" && strings.Contains(strings.ToLower(ae.ErrorMessage()), "object lock"):
		// "Access Denied because object protected by object lock.": S3's
		// answer to deleting a locked version, and the answer of servers
		// without versioning to deleting or replacing a locked object.
		return store.ErrLocked
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied" ||
		code == "InvalidToken" || code == "ExpiredToken" || status == http.StatusForbidden:
		return store.ErrAccessDenied
	}
	return nil
}

// credentialsFailed says whether err is of the call that gets the
// credentials (STS's AssumeRoleWithWebIdentity, a role's AssumeRole) made
// inside an S3 call, rather than of the S3 server.
func credentialsFailed(err error) bool {
	var outer *smithy.OperationError
	if !errors.As(err, &outer) {
		return false
	}
	var inner *smithy.OperationError
	return errors.As(outer.Err, &inner) && inner.ServiceID != outer.ServiceID
}

// fail wraps err with the store and the operation, and with the store
// error a caller can match, plus what to do about it.
func (s *Store) fail(op, key string, err error) error {
	what := op
	if key != "" {
		what += " " + key
	}
	kind := s.classify(err)
	if op == "open" && errors.Is(kind, store.ErrNotFound) {
		// HeadBucket has no body, so a missing bucket is a bare 404.
		kind = store.ErrBucketNotFound
	}
	if op == "put" && errors.Is(kind, store.ErrLocked) {
		// A lock refuses a create only where an object is.
		kind = store.ErrExists
	}
	switch {
	case errors.Is(kind, store.ErrBucketNotFound):
		return fmt.Errorf("store %s: %s: %w: bucket %q in region %s (create it, or fix the bucket or region of the store URL): %w",
			s.loc, what, store.ErrBucketNotFound, s.cfg.Bucket, s.cfg.Region, err)
	case errors.Is(kind, store.ErrAccessDenied):
		return fmt.Errorf("store %s: %s: %w: check the credentials (AWS_APPLICATION_CREDENTIALS[_JSON], AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a web identity's role and token file, or the instance role) and their permissions on bucket %q: %w",
			s.loc, what, store.ErrAccessDenied, s.cfg.Bucket, err)
	case errors.Is(kind, store.ErrNotFound):
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrNotFound)
	case errors.Is(kind, store.ErrExists):
		return fmt.Errorf("store %s: %s: %w", s.loc, what, store.ErrExists)
	case errors.Is(kind, store.ErrLocked):
		return fmt.Errorf("store %s: %s: %w: %w", s.loc, what, store.ErrLocked, err)
	case op == "open" && wrongRegion(err):
		// HeadBucket has no body: a server in another region than the
		// request was signed for says only 400.
		hint := ""
		if s.cfg.Provider == "ecs" {
			hint = " (the ecs provider signs for US-Standard, as etcd-backup-restore does, unless the URL gives ?region=)"
		}
		return fmt.Errorf("store %s: %s: the server refused the request; it was signed for region %q, and a server in another region answers so: give the bucket's region in the store URL (?region=…) or in the credentials' region%s: %w",
			s.loc, what, s.cfg.Region, hint, err)
	case strings.Contains(err.Error(), "no EC2 IMDS role found"):
		// The SDK's chain ends at the instance role: nothing before it
		// gave credentials. Not a refusal: an instance's metadata service
		// that does not answer yet says the same.
		return fmt.Errorf("store %s: %s: no credentials were found: set AWS_APPLICATION_CREDENTIALS[_JSON], AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a web identity's AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, or run where an instance role is: %w",
			s.loc, what, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("store %s: %s: nothing answers at the endpoint %s (check the store URL's endpoint, or the credentials' endpoint): %w",
			s.loc, what, cmp.Or(s.cfg.Endpoint, "of the region"), err)
	}
	return fmt.Errorf("store %s: %s: %w", s.loc, what, err)
}

// wrongRegion says whether err is how S3 servers refuse a request signed
// for another region: AuthorizationHeaderMalformed, or a bare 400 to a
// request without a body to explain it. A 400 of the call that got the
// credentials (STS) is not the S3 server's.
func wrongRegion(err error) bool {
	if credentialsFailed(err) {
		return false
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "AuthorizationHeaderMalformed" {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusBadRequest
}

// PendingUploads counts the multipart uploads under the store's prefix that
// were started and neither completed nor aborted. They are invisible to
// List but cost storage; a lifecycle rule on the bucket removes those a
// killed process leaves behind.
func (s *Store) PendingUploads(ctx context.Context) (int, error) {
	out, err := s.client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{
		Bucket: aws.String(s.cfg.Bucket),
		Prefix: aws.String(s.cfg.Prefix),
	})
	if err != nil {
		return 0, s.fail("list multipart uploads", "", err)
	}
	return len(out.Uploads), nil
}
