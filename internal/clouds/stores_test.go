package clouds_test

import (
	"context"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/azure"
	"github.com/etcdkit/etcdkit/store/gcs"
	"github.com/etcdkit/etcdkit/store/s3"
	"github.com/etcdkit/etcdkit/store/swift"
)

// forEachStore runs f against the file store and each cloud backend's
// emulator, on a bucket of their own.
func forEachStore(t *testing.T, f func(*testing.T, store.Store)) {
	t.Run("file", func(t *testing.T) { f(t, newStore(t)) })
	t.Run("s3", func(t *testing.T) {
		srv := emulator.Shared(t, emulator.S3)
		cli := awss3.New(awss3.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(srv.Endpoint),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		})
		bucket := emulator.Bucket(t)
		if _, err := cli.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			t.Fatal(err)
		}
		f(t, opened(t)(store.Opened(s3.New(context.Background(), s3.Config{
			Bucket: bucket, Prefix: "etcd/main", Endpoint: srv.Endpoint, PathStyle: true,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
		}))))
	})
	t.Run("gcs", func(t *testing.T) {
		srv := emulator.Shared(t, emulator.GCS)
		cli, err := storage.NewClient(context.Background(), option.WithEndpoint(srv.Endpoint+"/storage/v1/"), option.WithoutAuthentication())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cli.Close() }()
		bucket := emulator.Bucket(t)
		if err := cli.Bucket(bucket).Create(context.Background(), "etcdkit-test", nil); err != nil {
			t.Fatal(err)
		}
		f(t, opened(t)(store.Opened(gcs.New(context.Background(), gcs.Config{Bucket: bucket, Prefix: "etcd/main", Endpoint: srv.Endpoint}))))
	})
	t.Run("azure", func(t *testing.T) {
		srv := emulator.Shared(t, emulator.Azure)
		cred, err := container.NewSharedKeyCredential(srv.Account, srv.Key)
		if err != nil {
			t.Fatal(err)
		}
		name := emulator.Bucket(t)
		c, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/"+name, cred, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		f(t, opened(t)(store.Opened(azure.New(context.Background(), azure.Config{Container: name, Prefix: "etcd/main",
			Account: srv.Account, AccountKey: srv.Key, Endpoint: srv.Endpoint}))))
	})
	t.Run("swift", func(t *testing.T) {
		srv := emulator.Shared(t, emulator.Swift)
		name := emulator.Bucket(t)
		if err := srv.CreateSwiftContainer(name); err != nil {
			t.Fatal(err)
		}
		f(t, opened(t)(store.Opened(swift.New(context.Background(), swift.Config{Container: name, Prefix: "etcd/main",
			Credentials: swift.Credentials{AuthURL: srv.Endpoint, Username: srv.AccessKey, Password: srv.SecretKey}}))))
	})
}

func opened(t *testing.T) func(store.Store, error) store.Store {
	return func(st store.Store, err error) store.Store {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}
