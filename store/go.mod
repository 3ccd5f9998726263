module github.com/etcdkit/etcdkit/store

go 1.26.0

replace github.com/etcdkit/etcdkit/internal/reload => ../internal/reload

replace github.com/etcdkit/etcdkit/internal/scratch => ../internal/scratch

require (
	github.com/etcdkit/etcdkit/internal/reload v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/internal/scratch v0.0.0-00010101000000-000000000000
)

require golang.org/x/sys v0.49.0 // indirect
