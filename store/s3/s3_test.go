package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/emulator/s3lock"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
	"github.com/etcdkit/etcdkit/store/storetest"
)

// testOptions keep the suite's objects a few parts long without moving
// hundreds of megabytes; 5 MiB is the smallest part S3 accepts.
var testOptions = store.Options{PartSize: 5 << 20, Concurrency: 3}

func createBucket(t *testing.T, srv *emulator.Server, bucket string) {
	t.Helper()
	cli := awss3.New(awss3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	if _, err := cli.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

func isPartUpload(r *http.Request) bool {
	return r.Method == http.MethodPut && r.URL.Query().Has("partNumber")
}

func TestConformance(t *testing.T) {
	srv := emulator.Shared(t, emulator.S3)
	createBucket(t, srv, "conformance")
	wire := &storetest.Wire{IsPartUpload: isPartUpload}
	opts := testOptions
	opts.Transport = wire
	cfg := func(bucket, prefix string) s3.Config {
		return s3.Config{
			Bucket: bucket, Prefix: prefix, Endpoint: srv.Endpoint, PathStyle: true,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Options: opts,
		}
	}
	storetest.Run(t, storetest.Harness{
		Options: opts,
		Wire:    wire,
		Open: func(t *testing.T, prefix string) store.Store {
			st, err := s3.New(context.Background(), cfg("conformance", prefix))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		BadCredentials: func(t *testing.T) (store.Store, error) {
			c := cfg("conformance", "bad")
			c.SecretAccessKey = "not-the-secret"
			return store.Opened(s3.New(context.Background(), c))
		},
		MissingBucket: func(t *testing.T) (store.Store, error) {
			return store.Opened(s3.New(context.Background(), cfg("no-such-bucket", "")))
		},
		PendingUploads: func(t *testing.T, prefix string) int {
			st, err := s3.New(context.Background(), cfg("conformance", prefix))
			if err != nil {
				t.Fatal(err)
			}
			n, err := st.PendingUploads(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return n
		},
	})
}

// A bucket that keeps versions passes the whole suite: objects are first
// versions, deletes remove every version.
func TestVersionedConformance(t *testing.T) {
	srv := emulator.Shared(t, emulator.S3)
	createBucket(t, srv, "versioned")
	cli := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := cli.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String("versioned"),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	wire := &storetest.Wire{IsPartUpload: isPartUpload}
	opts := testOptions
	opts.Transport = wire
	storetest.Run(t, storetest.Harness{
		Options: opts,
		Wire:    wire,
		Open: func(t *testing.T, prefix string) store.Store {
			st, err := s3.New(context.Background(), s3.Config{Bucket: "versioned", Prefix: prefix, Endpoint: srv.Endpoint, PathStyle: true,
				AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Options: opts})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	})
}

// A bucket with Object Lock and a default retention (compliance, a day):
// every object is locked as it is written, and the bucket keeps versions,
// so what the backups wrote survives whoever writes over it.
func TestObjectLock(t *testing.T) {
	srv := emulator.Shared(t, emulator.S3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cli := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	if err := s3lock.CreateBucket(ctx, srv, "locked", 1); err != nil {
		t.Fatal(err)
	}
	spy := &checksumSpy{}
	opts := testOptions
	opts.Transport = spy
	st, err := s3.New(ctx, s3.Config{Bucket: "locked", Prefix: "etcd", Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Locked(t, st, testOptions)
	// AWS takes uploads to a locked bucket only with a checksum; the
	// emulator takes them either way, so the wire is checked.
	if spy.puts.Load() == 0 || spy.without.Load() != 0 {
		t.Fatalf("%d of %d uploads to a bucket with Object Lock carried no checksum", spy.without.Load(), spy.puts.Load())
	}

	// Someone with the same credentials replaces a snapshot and deletes it:
	// on a versioned bucket both only add versions over the first, which
	// is still listed and read.
	const key = "v2/Full-00000000-00000030-1700000200"
	name := "etcd/" + key
	if err := st.Put(ctx, key, strings.NewReader("the backup")); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("locked"), Key: aws.String(name), Body: strings.NewReader("tampered")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("locked"), Key: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	for _, fresh := range []bool{false, true} {
		// A store that listed before, and one that never did.
		read := st
		if fresh {
			if read, err = s3.New(ctx, s3.Config{Bucket: "locked", Prefix: "etcd", Endpoint: srv.Endpoint, PathStyle: true,
				AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Options: testOptions}); err != nil {
				t.Fatal(err)
			}
		}
		rc, err := read.Get(ctx, key)
		if err != nil {
			t.Fatalf("get after an overwrite and a delete marker: %v", err)
		}
		got, _ := io.ReadAll(rc)
		_ = rc.Close()
		if string(got) != "the backup" {
			t.Fatalf("read %q, want the first version", got)
		}
	}
	listed := func() bool {
		objs, err := st.List(ctx, "v2/")
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(objs, func(o store.Object) bool { return o.Key == key && o.Size == int64(len("the backup")) })
	}
	if !listed() {
		t.Fatal("a delete marker hid the first version from the listing")
	}
	// The lock told is the first version's, from the bucket's default.
	if until, err := store.LockedUntil(ctx, st, key); err != nil || time.Until(until) < 23*time.Hour || time.Until(until) > 25*time.Hour {
		t.Fatalf("LockedUntil(%s) = %v, %v; want a day from now", key, until, err)
	}
	// etcd-backup-restore's way to skip a snapshot on such a bucket: a
	// delete marker and the tag on its first version.
	vs, err := cli.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("locked"), Prefix: aws.String(name)})
	if err != nil || len(vs.Versions) != 2 {
		t.Fatalf("versions of %s: %d, %v", name, len(vs.Versions), err)
	}
	if _, err := cli.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: aws.String("locked"), Key: aws.String(name), VersionId: vs.Versions[1].VersionId,
		Tagging: &s3types.Tagging{TagSet: []s3types.Tag{{Key: aws.String(s3.ExcludeTag), Value: aws.String("true")}}}}); err != nil {
		t.Fatal(err)
	}
	if listed() {
		t.Fatal("a snapshot tagged " + s3.ExcludeTag + " under a delete marker is listed")
	}
	if out, err := store.ListExcluded(ctx, st, "v2/"); err != nil || len(out) != 1 || out[0].Key != key || out[0].Size != int64(len("the backup")) {
		t.Fatalf("excluded %+v, %v; want %s", out, err, key)
	}
}

// TestCredentialFiles opens stores from URLs only, with the credentials
// where etcd-backup-restore deployments keep them.
func TestCredentialFiles(t *testing.T) {
	srv := emulator.Shared(t, emulator.S3)
	createBucket(t, srv, "creds")
	ctx := context.Background()

	t.Run("json", func(t *testing.T) {
		p := credFile(t, fmt.Sprintf(`{"accessKeyID":%q,"secretAccessKey":%q,"region":"us-east-1","endpoint":%q,"s3ForcePathStyle":true,"bucketName":"creds"}`,
			srv.AccessKey, srv.SecretKey, srv.Endpoint))
		t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", p)
		storetest.UseURL(t, "s3://creds/from-json")
	})
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		for name, v := range map[string]string{
			"accessKeyID": srv.AccessKey, "secretAccessKey": srv.SecretKey + "\n", "region": "us-east-1",
			"endpoint": srv.Endpoint, "s3ForcePathStyle": "true",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", "")
		t.Setenv("AWS_APPLICATION_CREDENTIALS", dir)
		storetest.UseURL(t, "s3://creds/from-dir")
	})
	t.Run("prefixed", func(t *testing.T) {
		// The source store of a copy reads SOURCE_-prefixed variables;
		// the unprefixed ones belong to the target and are wrong here.
		p := credFile(t, fmt.Sprintf(`{"accessKeyID":%q,"secretAccessKey":%q,"region":"us-east-1","endpoint":%q,"s3ForcePathStyle":true}`,
			srv.AccessKey, srv.SecretKey, srv.Endpoint))
		wrong := credFile(t, `{"accessKeyID":"nobody","secretAccessKey":"nothing","region":"us-east-1","endpoint":"http://127.0.0.1:1"}`)
		t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", wrong)
		t.Setenv("SOURCE_AWS_APPLICATION_CREDENTIALS_JSON", p)
		storetest.UseURL(t, "s3://creds/from-source?env-prefix=SOURCE_")
	})
	t.Run("sdk-environment", func(t *testing.T) {
		t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", "")
		t.Setenv("AWS_APPLICATION_CREDENTIALS", "")
		t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
		t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
		storetest.UseURL(t, "s3://creds/from-env?endpoint="+srv.Endpoint+"&path-style=true&region=us-east-1")
	})
	t.Run("absent-paths", func(t *testing.T) {
		// etcd-druid sets the variables where no secret is mounted: the
		// SDK's chain answers (here its environment).
		t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", filepath.Join(t.TempDir(), "absent.json"))
		t.Setenv("AWS_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "absent"))
		t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
		t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
		storetest.UseURL(t, "s3://creds/absent-paths?endpoint="+srv.Endpoint+"&path-style=true&region=us-east-1")
	})
	t.Run("web-identity-file", func(t *testing.T) {
		sts := newSTS(t, srv)
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, []byte("token-1"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := credFile(t, fmt.Sprintf(`{"roleARN":"arn:aws:iam::123456789012:role/etcd","tokenPath":%q,"region":"us-east-1","endpoint":%q,"s3ForcePathStyle":true}`,
			token, srv.Endpoint))
		t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", p)
		t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
		storetest.UseURL(t, "s3://creds/web-identity")
		if got := sts.tokens(); len(got) == 0 || got[len(got)-1] != "token-1" {
			t.Fatalf("tokens exchanged: %q", got)
		}
		// The token rotates on disk: the same store's next exchange carries
		// the new one (the keys the endpoint gives have expired already).
		st, err := store.Open(ctx, "s3://creds/web-identity")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(token, []byte("token-2"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := st.List(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if got := sts.tokens(); got[len(got)-1] != "token-2" {
			t.Fatalf("tokens exchanged after the rotation: %q", got)
		}
		// A token STS refuses is the credentials' fault, not the S3
		// server's: no word of regions.
		if err := os.WriteFile(token, []byte("refused"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = store.Open(ctx, "s3://creds/web-identity")
		if !errors.Is(err, store.ErrAccessDenied) || strings.Contains(err.Error(), "region") || !strings.Contains(err.Error(), "web identity") {
			t.Fatalf("open with a token STS refuses: %v", err)
		}
	})
	t.Run("web-identity-sdk-environment", func(t *testing.T) {
		sts := newSTS(t, srv)
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, []byte("token-env"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", "")
		t.Setenv("AWS_APPLICATION_CREDENTIALS", "")
		t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/etcd")
		t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", token)
		t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
		t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
		storetest.UseURL(t, "s3://creds/web-identity-env?endpoint="+srv.Endpoint+"&path-style=true&region=us-east-1")
		if got := sts.tokens(); len(got) == 0 || got[0] != "token-env" {
			t.Fatalf("tokens exchanged: %q", got)
		}
	})
	// etcd-backup-restore's other S3-compatible providers, each with its
	// own credentials; endpoints without a scheme, as they give them.
	host := strings.TrimPrefix(srv.Endpoint, "http://")
	t.Run("provider-ocs", func(t *testing.T) {
		p := credFile(t, fmt.Sprintf(`{"accessKeyID":%q,"secretAccessKey":%q,"region":"us-east-1","endpoint":%q,"disableSSL":true}`, srv.AccessKey, srv.SecretKey, host))
		t.Setenv("OPENSHIFT_APPLICATION_CREDENTIALS_JSON", p)
		storetest.UseURL(t, "s3://creds/ocs?provider=ocs")
	})
	t.Run("provider-oss", func(t *testing.T) {
		dir := t.TempDir()
		for name, v := range map[string]string{"accessKeyID": srv.AccessKey, "accessKeySecret": srv.SecretKey, "storageEndpoint": srv.Endpoint} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("ALICLOUD_APPLICATION_CREDENTIALS", dir)
		// OSS addresses buckets by host; the emulator by path.
		storetest.UseURL(t, "s3://creds/oss?provider=oss&path-style=true")
	})
	t.Run("provider-ecs", func(t *testing.T) {
		t.Setenv("ECS_ENDPOINT", host)
		t.Setenv("ECS_DISABLE_SSL", "true")
		t.Setenv("ECS_ACCESS_KEY_ID", srv.AccessKey)
		t.Setenv("ECS_SECRET_ACCESS_KEY", srv.SecretKey)
		// ECS signs for US-Standard, which the emulator refuses: its own.
		storetest.UseURL(t, "s3://creds/ecs?provider=ecs&region=us-east-1")
		if _, err := store.Open(ctx, "s3://creds/ecs?provider=ecs"); err == nil || !strings.Contains(err.Error(), `signed for region "US-Standard"`) ||
			!strings.Contains(err.Error(), "?region=") {
			t.Fatalf("ECS signing for a region the server is not in: %v", err)
		}
		t.Setenv("ECS_SECRET_ACCESS_KEY", "")
		if _, err := store.Open(ctx, "s3://creds/ecs?provider=ecs"); err == nil || !strings.Contains(err.Error(), "ECS_SECRET_ACCESS_KEY") {
			t.Fatalf("ECS without its secret: %v", err)
		}
	})
	t.Run("sse-c-half", func(t *testing.T) {
		t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", credFile(t, `{"accessKeyID":"a","secretAccessKey":"b","sseCustomerKey":"k"}`))
		_, err := store.Open(ctx, "s3://creds/x?endpoint="+srv.Endpoint)
		if err == nil || !strings.Contains(err.Error(), "sseCustomerAlgorithm") {
			t.Fatalf("open with a key and no algorithm: %v", err)
		}
	})
}

func TestURLOptions(t *testing.T) {
	ctx := context.Background()
	for url, want := range map[string]string{
		"s3:///prefix":                    "no bucket",
		"s3://b/p?regoin=eu-west-1":       "unknown option(s) regoin",
		"s3://b/p?path-style=maybe":       "not a boolean",
		"s3://b/../p?endpoint=http://x:1": "..",
	} {
		if _, err := store.Open(ctx, url); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("open %s: %v, want %q", url, err, want)
		}
	}
	_, err := store.Open(ctx, "s3://b/p?endpoint=http://127.0.0.1:1&region=us-east-1")
	if err == nil || errors.Is(err, store.ErrAccessDenied) || !strings.Contains(err.Error(), "s3://b/p") {
		t.Fatalf("unreachable endpoint: %v", err)
	}
}

// stsServer is a token endpoint on loopback that answers
// AssumeRoleWithWebIdentity with the emulator's keys, already expired, so
// each store call exchanges the token again, and records the tokens. It
// gives no session token: the emulator refuses a request that carries one
// (400), where AWS requires it with such keys.
type stsServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newSTS(t *testing.T, srv *emulator.Server) *stsServer {
	t.Helper()
	s := &stsServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" || r.Form.Get("RoleArn") == "" {
			http.Error(w, "not an AssumeRoleWithWebIdentity call", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, r.Form.Get("WebIdentityToken"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		if r.Form.Get("WebIdentityToken") == "refused" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprint(w, `<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>the token is not valid</Message></Error></ErrorResponse>`)
			return
		}
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>%s/session</Arn><AssumedRoleId>id:session</AssumedRoleId></AssumedRoleUser></AssumeRoleWithWebIdentityResult>
<ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`,
			srv.AccessKey, srv.SecretKey, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), r.Form.Get("RoleArn"))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *stsServer) tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// Keys rotated on the server and in the credential directory together
// (a Kubernetes secret volume swaps its ..data link): the store opened
// before goes on with the new keys, without a restart, and the old keys
// are refused from then on.
func TestCredentialRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := emulator.RequireWith(t, emulator.S3, emulator.Options{S3Users: true})
	createBucket(t, srv, "rotation")
	for _, k := range []string{"key-1", "key-2"} {
		if err := srv.CreateS3User(ctx, k, "secret-of-"+k); err != nil {
			t.Fatal(err)
		}
	}
	// The layout of a secret volume: the fields link into ..data, which
	// links to the current version's directory.
	dir := t.TempDir()
	version := func(k string) {
		v := filepath.Join(dir, "..v-"+k)
		if err := os.Mkdir(v, 0o700); err != nil {
			t.Fatal(err)
		}
		for name, value := range map[string]string{"accessKeyID": k, "secretAccessKey": "secret-of-" + k, "region": "us-east-1",
			"endpoint": srv.Endpoint, "s3ForcePathStyle": "true"} {
			if err := os.WriteFile(filepath.Join(v, name), []byte(value), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(v), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("key-1")
	for _, name := range []string{"accessKeyID", "secretAccessKey", "region", "endpoint", "s3ForcePathStyle"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", "")
	t.Setenv("AWS_APPLICATION_CREDENTIALS", dir)
	st, err := store.Open(ctx, "s3://rotation/p")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "before", strings.NewReader("1")); err != nil {
		t.Fatal(err)
	}
	version("key-2")
	if err := srv.DeleteS3User(ctx, "key-1"); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "after", strings.NewReader("2")); err != nil {
		t.Fatalf("a put after the rotation: %v", err)
	}
	if objs, err := st.List(ctx, ""); err != nil || len(objs) != 2 {
		t.Fatalf("list after the rotation: %v %v", objs, err)
	}
	old, err := s3.New(ctx, s3.Config{Bucket: "rotation", Endpoint: srv.Endpoint, Region: "us-east-1", PathStyle: true,
		AccessKeyID: "key-1", SecretAccessKey: "secret-of-key-1"})
	if err == nil {
		_, err = old.List(ctx, "")
	}
	if !errors.Is(err, store.ErrAccessDenied) {
		t.Fatalf("the old key after the rotation: %v, want access denied", err)
	}
}

// SSE-C as etcd-backup-restore sends it: every request that writes or
// reads an object carries the algorithm, the key as the credential file
// gives it and the MD5 of those bytes, single and multipart uploads alike.
// The emulator takes the headers without encrypting, so they are checked
// on the wire.
func TestSSECustomerKey(t *testing.T) {
	srv := emulator.Shared(t, emulator.S3)
	createBucket(t, srv, "ssec")
	ctx := context.Background()
	key := "0123456789abcdef0123456789abcdef"
	p := credFile(t, fmt.Sprintf(`{"accessKeyID":%q,"secretAccessKey":%q,"region":"us-east-1","sseCustomerKey":%q,"sseCustomerAlgorithm":"AES256"}`,
		srv.AccessKey, srv.SecretKey, key))
	t.Setenv("AWS_APPLICATION_CREDENTIALS_JSON", p)
	var (
		mu   sync.Mutex
		seen []string
	)
	sum := md5.Sum([]byte(key))
	wantMD5 := base64.StdEncoding.EncodeToString(sum[:])
	record := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.Contains(r.URL.Path, "/obj") {
			h := r.Header
			ok := h.Get("X-Amz-Server-Side-Encryption-Customer-Algorithm") == "AES256" &&
				h.Get("X-Amz-Server-Side-Encryption-Customer-Key") == key &&
				h.Get("X-Amz-Server-Side-Encryption-Customer-Key-Md5") == wantMD5
			q := r.URL.Query()
			op := r.Method
			switch {
			case q.Has("uploads"):
				op += " uploads"
			case q.Has("partNumber"):
				op += " part"
			case q.Has("uploadId"):
				// Completing and aborting take no key.
				return http.DefaultTransport.RoundTrip(r)
			}
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s %v", op, ok))
			mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	st, err := s3.New(ctx, s3.Config{Bucket: "ssec", Endpoint: srv.Endpoint, PathStyle: true, Options: store.Options{PartSize: 5 << 20, Concurrency: 2, Transport: record}})
	if err != nil {
		t.Fatal(err)
	}
	small, large := []byte("a small object"), bytes.Repeat([]byte("x"), 6<<20)
	for name, b := range map[string][]byte{"obj-small": small, "obj-large": large} {
		if err := st.Put(ctx, name, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		rc, err := st.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s read back: %d bytes, %v", name, len(got), err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	kinds := map[string]bool{}
	for _, s := range seen {
		if !strings.HasSuffix(s, " true") {
			t.Errorf("a request without the customer key as etcd-backup-restore sends it: %s", s)
		}
		kinds[strings.TrimSuffix(s, " true")] = true
	}
	for _, k := range []string{"PUT", "POST uploads", "PUT part", "HEAD", "GET"} {
		if !kinds[k] {
			t.Errorf("no %s request seen: %v", k, seen)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// SSE-KMS: each upload, single or multipart, asks S3 to encrypt with the
// key of ?sse-kms-key-id. The emulator has no KMS and takes the headers
// without encrypting, so they are checked on the wire.
func TestSSEKMS(t *testing.T) {
	srv := emulator.Shared(t, emulator.S3)
	createBucket(t, srv, "kms")
	var (
		mu   sync.Mutex
		seen []string
	)
	record := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPut || r.URL.Query().Has("uploads") {
			ok := r.Header.Get("X-Amz-Server-Side-Encryption") == "aws:kms" && r.Header.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id") == "alias/etcd"
			if !r.URL.Query().Has("partNumber") {
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%s %s %v", r.Method, r.URL.RawQuery, ok))
				mu.Unlock()
			}
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	st, err := s3.New(t.Context(), s3.Config{Bucket: "kms", Endpoint: srv.Endpoint, PathStyle: true, Region: "us-east-1",
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, KMSKeyID: "alias/etcd", Options: store.Options{PartSize: 5 << 20, Transport: record}})
	if err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"small": 10, "large": 6 << 20} {
		if err := st.Put(t.Context(), name, bytes.NewReader(make([]byte, size))); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("uploads seen: %v", seen)
	}
	for _, s := range seen {
		if !strings.HasSuffix(s, " true") {
			t.Errorf("an upload without the SSE-KMS headers: %s", s)
		}
	}
}

// credFile writes a credential file of body and returns its path.
func credFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// checksumSpy counts the uploads (PutObject, UploadPart) and those that
// carry no checksum of their body.
type checksumSpy struct {
	puts, without atomic.Int64
}

func (c *checksumSpy) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && req.Header.Get("X-Amz-Copy-Source") == "" && !req.URL.Query().Has("tagging") {
		c.puts.Add(1)
		has := req.Header.Get("Content-Md5") != "" || req.Header.Get("X-Amz-Trailer") != "" || req.Header.Get("X-Amz-Sdk-Checksum-Algorithm") != ""
		for k := range req.Header {
			has = has || strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-")
		}
		if !has {
			c.without.Add(1)
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// ?lock-for locks each object the store writes, on a bucket with Object
// Lock and no default retention, copies included; a bucket without Object
// Lock is refused at open.
func TestLockFor(t *testing.T) {
	srv := emulator.Shared(t, emulator.S3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cli := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	if err := s3lock.CreateBucket(ctx, srv, "lockfor", 0); err != nil {
		t.Fatal(err)
	}
	createBucket(t, srv, "unlockable")
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	if _, err := store.Open(ctx, "s3://unlockable/p?lock-for=1h&endpoint="+srv.Endpoint+"&path-style=true&region=us-east-1"); !errors.Is(err, store.ErrBadURL) || !strings.Contains(err.Error(), "no Object Lock") {
		t.Fatalf("lock-for on a bucket without Object Lock: %v", err)
	}
	if _, err := store.Open(ctx, "s3://lockfor/p?lock-for=1h&lock-mode=forever&endpoint="+srv.Endpoint+"&path-style=true&region=us-east-1"); !errors.Is(err, store.ErrBadURL) {
		t.Fatalf("lock-mode forever: %v", err)
	}
	st, err := store.Open(ctx, "s3://lockfor/p?lock-for=1h&lock-mode=compliance&endpoint="+srv.Endpoint+"&path-style=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"v2/Full-00000000-00000010-1700000000", "v2/Full-00000000-00000010-1700000001"} {
		if key == "v2/Full-00000000-00000010-1700000000" {
			if err := st.Put(ctx, key, strings.NewReader("full")); err != nil {
				t.Fatal(err)
			}
		} else if onServer, err := store.CopyObject(ctx, st, "v2/Full-00000000-00000010-1700000000", key); err != nil || !onServer {
			t.Fatalf("copy: on the server %v, %v", onServer, err)
		}
		r, err := cli.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String("lockfor"), Key: aws.String("p/" + key)})
		if err != nil || r.Retention == nil || r.Retention.Mode != s3types.ObjectLockRetentionModeCompliance ||
			time.Until(aws.ToTime(r.Retention.RetainUntilDate)) < 50*time.Minute {
			t.Fatalf("retention of %s: %+v, %v", key, r, err)
		}
		if until, err := store.LockedUntil(ctx, st, key); err != nil || until.Sub(aws.ToTime(r.Retention.RetainUntilDate)).Abs() > time.Second {
			t.Fatalf("LockedUntil(%s) = %v, %v; the object says %v", key, until, err, aws.ToTime(r.Retention.RetainUntilDate))
		}
		if err := st.Delete(ctx, key); !errors.Is(err, store.ErrLocked) {
			t.Fatalf("delete of %s locked an hour: %v", key, err)
		}
	}
}

// Two mistakes of a new setup get a message that says what to fix: no
// credentials anywhere, and an endpoint where nothing listens.
func TestNoCredentialsNoEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	url := "s3://b/p?endpoint=" + closed + "&path-style=true&region=us-east-1"
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_APPLICATION_CREDENTIALS", "AWS_APPLICATION_CREDENTIALS_JSON", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if _, err := store.Open(ctx, url); err == nil || !strings.Contains(err.Error(), "no credentials were found: set AWS_APPLICATION_CREDENTIALS") {
		t.Fatalf("no credentials: %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AK")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SK")
	if _, err := store.Open(ctx, url); err == nil || !strings.Contains(err.Error(), "nothing answers at the endpoint "+closed) {
		t.Fatalf("nothing at the endpoint: %v", err)
	}
}
