module github.com/etcdkit/etcdkit/store/s3

go 1.26.0

replace github.com/etcdkit/etcdkit => ../..

replace github.com/etcdkit/etcdkit/internal/emulator/s3lock => ../../internal/emulator/s3lock

replace github.com/etcdkit/etcdkit/internal/reload => ../../internal/reload

replace github.com/etcdkit/etcdkit/internal/scratch => ../../internal/scratch

replace github.com/etcdkit/etcdkit/sidecar/api => ../../sidecar/api

replace github.com/etcdkit/etcdkit/store => ../../store

replace github.com/etcdkit/etcdkit/tlsfiles => ../../tlsfiles

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/config v1.33.18
	github.com/aws/aws-sdk-go-v2/credentials v1.21.0
	github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager v0.5.7
	github.com/aws/aws-sdk-go-v2/service/s3 v1.114.10
	github.com/aws/aws-sdk-go-v2/service/sts v1.52.0
	github.com/aws/smithy-go v1.28.9
	github.com/etcdkit/etcdkit v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/internal/emulator/s3lock v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/store v0.0.0-00010101000000-000000000000
)

require (
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.27 // indirect
	github.com/aws/aws-sdk-go-v2/feature/ec2/imds v1.20.9 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/v4a v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding v1.13.25 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/checksum v1.11.13 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/presigned-url v1.14.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/internal/s3shared v1.20.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/signin v1.13.1 // indirect
	github.com/aws/aws-sdk-go-v2/service/sso v1.39.5 // indirect
	github.com/aws/aws-sdk-go-v2/service/ssooidc v1.44.5 // indirect
	github.com/etcdkit/etcdkit/internal/reload v0.0.0-00010101000000-000000000000 // indirect
	github.com/etcdkit/etcdkit/internal/scratch v0.0.0-00010101000000-000000000000 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/etcdkit/etcdkit/etcdversion => ../../etcdversion

replace github.com/etcdkit/etcdkit/validate => ../../validate

replace github.com/etcdkit/etcdkit/internal/database => ../../internal/database

replace github.com/etcdkit/etcdkit/internal/frames => ../../internal/frames

replace github.com/etcdkit/etcdkit/snapshot => ../../snapshot
