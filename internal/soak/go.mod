module github.com/etcdkit/etcdkit/internal/soak

go 1.26.0

replace github.com/etcdkit/etcdkit => ../..

replace github.com/etcdkit/etcdkit/internal/emulator/s3lock => ../../internal/emulator/s3lock

replace github.com/etcdkit/etcdkit/internal/reload => ../../internal/reload

replace github.com/etcdkit/etcdkit/internal/scratch => ../../internal/scratch

replace github.com/etcdkit/etcdkit/sidecar/api => ../../sidecar/api

replace github.com/etcdkit/etcdkit/store => ../../store

replace github.com/etcdkit/etcdkit/store/s3 => ../../store/s3

replace github.com/etcdkit/etcdkit/tlsfiles => ../../tlsfiles

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/aws/aws-sdk-go-v2/credentials v1.21.0
	github.com/aws/aws-sdk-go-v2/service/s3 v1.114.10
	github.com/etcdkit/etcdkit v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/sidecar/api v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/snapshot v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/store v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/store/s3 v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/tlsfiles v0.0.0-00010101000000-000000000000
	github.com/klauspost/compress v1.20.2
	go.etcd.io/bbolt v1.5.0
	go.etcd.io/etcd/api/v3 v3.7.3
	go.etcd.io/etcd/client/v3 v3.7.3
	go.etcd.io/etcd/server/v3 v3.7.3
	google.golang.org/protobuf v1.36.12
)

require (
	filippo.io/age v1.3.2 // indirect
	filippo.io/hpke v0.4.0 // indirect
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.27 // indirect
	github.com/aws/aws-sdk-go-v2/config v1.33.18 // indirect
	github.com/aws/aws-sdk-go-v2/feature/ec2/imds v1.20.9 // indirect
	github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager v0.5.7 // indirect
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
	github.com/aws/aws-sdk-go-v2/service/sts v1.52.0 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/etcdkit/etcdkit/internal/database v0.0.0-00010101000000-000000000000 // indirect
	github.com/etcdkit/etcdkit/internal/frames v0.0.0-00010101000000-000000000000 // indirect
	github.com/etcdkit/etcdkit/internal/reload v0.0.0-00010101000000-000000000000 // indirect
	github.com/etcdkit/etcdkit/internal/scratch v0.0.0-00010101000000-000000000000 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.7.3 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
	google.golang.org/grpc v1.84.0 // indirect
)

replace github.com/etcdkit/etcdkit/etcdversion => ../../etcdversion

replace github.com/etcdkit/etcdkit/validate => ../../validate

replace github.com/etcdkit/etcdkit/internal/database => ../../internal/database

replace github.com/etcdkit/etcdkit/internal/frames => ../../internal/frames

replace github.com/etcdkit/etcdkit/snapshot => ../../snapshot
