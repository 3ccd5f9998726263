module github.com/etcdkit/etcdkit/internal/database/withbolt

go 1.26.0

replace github.com/etcdkit/etcdkit/internal/database => ../../../internal/database

require (
	github.com/etcdkit/etcdkit/internal/database v0.0.0-00010101000000-000000000000
	go.etcd.io/bbolt v1.5.0
	go.etcd.io/etcd/api/v3 v3.7.3
	google.golang.org/protobuf v1.36.12
)

require golang.org/x/sys v0.49.0 // indirect
