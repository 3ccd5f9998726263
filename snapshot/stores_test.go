package snapshot_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/s3"
)

// forEachStore runs f against the file store and the S3 emulator.
func forEachStore(t *testing.T, f func(*testing.T, store.Store)) {
	t.Run("file", func(t *testing.T) { f(t, newStore(t)) })
	t.Run("s3", func(t *testing.T) {
		srv := emulator.Require(t, emulator.S3)
		cli := awss3.New(awss3.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(srv.Endpoint),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		})
		if _, err := cli.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String("snapshots")}); err != nil {
			t.Fatal(err)
		}
		st, err := s3.New(context.Background(), s3.Config{
			Bucket: "snapshots", Prefix: "etcd/main", Endpoint: srv.Endpoint, PathStyle: true,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey,
		})
		if err != nil {
			t.Fatal(err)
		}
		f(t, st)
	})
}
