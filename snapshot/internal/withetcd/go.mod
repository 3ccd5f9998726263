module github.com/etcdkit/etcdkit/snapshot/internal/withetcd

go 1.26.0

replace github.com/etcdkit/etcdkit/snapshot => ../../../snapshot

replace github.com/etcdkit/etcdkit/internal/database => ../../../internal/database

replace github.com/etcdkit/etcdkit/internal/frames => ../../../internal/frames

replace github.com/etcdkit/etcdkit/internal/reload => ../../../internal/reload

replace github.com/etcdkit/etcdkit/internal/scratch => ../../../internal/scratch

replace github.com/etcdkit/etcdkit/store => ../../../store

require (
	github.com/etcdkit/etcdkit/snapshot v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/store v0.0.0-00010101000000-000000000000
	go.etcd.io/etcd/api/v3 v3.7.3
	go.etcd.io/etcd/client/v3 v3.7.3
)

require (
	filippo.io/age v1.3.2 // indirect
	filippo.io/hpke v0.4.0 // indirect
	github.com/coreos/go-semver v0.3.1 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/etcdkit/etcdkit/internal/database v0.0.0-00010101000000-000000000000 // indirect
	github.com/etcdkit/etcdkit/internal/frames v0.0.0-00010101000000-000000000000 // indirect
	github.com/etcdkit/etcdkit/internal/scratch v0.0.0-00010101000000-000000000000 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.29.0 // indirect
	github.com/klauspost/compress v1.20.2 // indirect
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
	google.golang.org/protobuf v1.36.12 // indirect
)
