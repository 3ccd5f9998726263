package clouds_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/fleet"
	"github.com/etcdkit/etcdkit/internal/chaintest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
	"github.com/etcdkit/etcdkit/store/storetest"
)

// A scan of a bucket on S3 (versitygw) costs one listing of the bucket
// and a few reads a prefix (its identity and newest drill record, and a
// record of each timeline it began): the requests grow with the prefixes
// by a constant, not with anything else.
func TestAScanOnS3IsLinearInThePrefixes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := emulator.Shared(t, emulator.S3)
	bucket := emulator.Bucket(t)
	api := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")})
	if _, err := api.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	wire := &storetest.Wire{}
	st, err := s3.New(ctx, s3.Config{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, Options: store.Options{Transport: wire}})
	if err != nil {
		t.Fatal(err)
	}
	template := clusterBackups(t, ctx)
	per := map[int]int{}
	have := 0
	for _, n := range []int{20, 40} {
		if err := populate(ctx, st, template, have, n-have); err != nil {
			t.Fatal(err)
		}
		have = n
		before := wire.Counts()
		f, err := fleet.Scan(ctx, st, fleet.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Clusters) != n {
			t.Fatalf("%d prefixes found, want %d", len(f.Clusters), n)
		}
		for _, c := range f.Clusters {
			if c.Problem != "" || c.ClusterID == "" || c.Drill == nil {
				t.Fatalf("prefix %s: %+v", c.Prefix, c)
			}
		}
		per[n] = wire.Counts().Sub(before).Requests
		t.Logf("%d prefixes, %d objects: %d requests in %v", n, f.Objects, per[n], f.Took.Round(time.Millisecond))
	}
	// One listing page (up to 1,000 objects), and a prefix's identity and
	// newest drill record read, each a HEAD and a GET.
	if per[20] > 1+4*20 || per[40]-per[20] > 4*20 {
		t.Fatalf("requests: %v; want one listing page and four requests a prefix", per)
	}
}

// clusterBackups is one cluster's backups as its sidecar leaves them
// (the full, a delta, their records and a drill's), by key.
func clusterBackups(t *testing.T, ctx context.Context) map[string][]byte {
	t.Helper()
	c := etcdtest.Start(t, etcdtest.Options{UnsafeNoFsync: true})
	mem, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	chaintest.BackUp(t, ctx, c.Client(t), mem, "etcd-main", "")
	objs, err := mem.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, o := range objs {
		rc, err := mem.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = b
	}
	return out
}

// populate writes the template's objects under the prefixes
// seed/shoot--NNNN/ for NNNN from first to first+n-1.
func populate(ctx context.Context, st store.Store, template map[string][]byte, first, n int) error {
	for i := first; i < first+n; i++ {
		for key, b := range template {
			if err := st.Put(ctx, fmt.Sprintf("seed/shoot--%04d/%s", i, key), bytes.NewReader(b)); err != nil {
				return err
			}
		}
	}
	return nil
}
