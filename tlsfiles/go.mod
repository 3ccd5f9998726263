module github.com/etcdkit/etcdkit/tlsfiles

go 1.26.0

replace github.com/etcdkit/etcdkit => ..

replace github.com/etcdkit/etcdkit/internal/reload => ../internal/reload

replace github.com/etcdkit/etcdkit/internal/scratch => ../internal/scratch

replace github.com/etcdkit/etcdkit/sidecar/api => ../sidecar/api

replace github.com/etcdkit/etcdkit/store => ../store

require (
	github.com/etcdkit/etcdkit v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/internal/reload v0.0.0-00010101000000-000000000000
)

replace github.com/etcdkit/etcdkit/etcdversion => ../etcdversion

replace github.com/etcdkit/etcdkit/validate => ../validate

replace github.com/etcdkit/etcdkit/internal/database => ../internal/database

replace github.com/etcdkit/etcdkit/internal/frames => ../internal/frames

replace github.com/etcdkit/etcdkit/snapshot => ../snapshot
