// Package s3lock creates S3 buckets with Object Lock in the tests' S3
// emulator, through the AWS SDK. It is a module of its own so that the
// SDK stays out of the library's go.mod: only the tests of the S3 store,
// the binaries, the cloud tests and the bench import it.
package s3lock

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/etcdkit/etcdkit/internal/emulator"
)

// CreateBucket creates a bucket with Object Lock (and so
// versioning) in the S3 emulator; with defaultDays above 0 every object
// written there is locked that many days in compliance mode.
func CreateBucket(ctx context.Context, s *emulator.Server, name string, defaultDays int32) error {
	cli := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")})
	if _, err := cli.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		return fmt.Errorf("emulator s3: create bucket %s with Object Lock: %w", name, err)
	}
	if defaultDays <= 0 {
		return nil
	}
	_, err := cli.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: aws.String(name),
		ObjectLockConfiguration: &s3types.ObjectLockConfiguration{ObjectLockEnabled: s3types.ObjectLockEnabledEnabled,
			Rule: &s3types.ObjectLockRule{DefaultRetention: &s3types.DefaultRetention{Mode: s3types.ObjectLockRetentionModeCompliance, Days: aws.Int32(defaultDays)}}}})
	if err != nil {
		return fmt.Errorf("emulator s3: default retention of bucket %s: %w", name, err)
	}
	return nil
}
