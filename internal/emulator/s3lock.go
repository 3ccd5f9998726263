package emulator

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// CreateLockedS3Bucket creates a bucket with Object Lock (and so
// versioning) in the S3 emulator; with defaultDays above 0 every object
// written there is locked that many days in compliance mode.
func (s *Server) CreateLockedS3Bucket(ctx context.Context, name string, defaultDays int32) error {
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
