package soak

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcdkit/etcdkit/internal/emulator"
	s3store "github.com/etcdkit/etcdkit/store/s3"
)

// UseS3 makes a bucket for a soak on the S3 emulator srv and fills in the
// store fields of o; the processes' credentials files go in dir.
func UseS3(ctx context.Context, o *Options, srv *emulator.Server, dir string) error {
	raw := awss3.New(awss3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	if _, err := raw.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("soak")}); err != nil {
		return fmt.Errorf("S3 emulator: bucket soak: %w", err)
	}
	var err error
	if o.Direct, err = s3store.New(ctx, s3store.Config{Bucket: "soak", Prefix: "etcd", Endpoint: srv.Endpoint, PathStyle: true,
		Region: "us-east-1", AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}); err != nil {
		return err
	}
	o.StoreTarget = srv.Endpoint
	o.StoreURL = "s3://soak/etcd?endpoint={endpoint}&path-style=true&region=us-east-1"
	o.DirectStoreURL = "s3://soak/etcd?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1"
	// The processes take the credentials from their environment, and
	// nothing else from the machine's.
	o.Env = []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}
	return nil
}
