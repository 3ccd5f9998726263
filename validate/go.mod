module github.com/etcdkit/etcdkit/validate

go 1.26.0

replace github.com/etcdkit/etcdkit/etcdversion => ../etcdversion

require (
	github.com/etcdkit/etcdkit/etcdversion v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/internal/database v0.0.0-00010101000000-000000000000
	go.etcd.io/bbolt v1.5.0
)

require golang.org/x/sys v0.49.0 // indirect

replace github.com/etcdkit/etcdkit/internal/database => ../internal/database
