module github.com/etcdkit/etcdkit/snapshot

go 1.26.0

replace github.com/etcdkit/etcdkit/internal/database => ../internal/database

replace github.com/etcdkit/etcdkit/internal/frames => ../internal/frames

replace github.com/etcdkit/etcdkit/internal/reload => ../internal/reload

replace github.com/etcdkit/etcdkit/internal/scratch => ../internal/scratch

replace github.com/etcdkit/etcdkit/store => ../store

require (
	filippo.io/age v1.3.2
	github.com/etcdkit/etcdkit/internal/database v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/internal/frames v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/internal/scratch v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/store v0.0.0-00010101000000-000000000000
	github.com/klauspost/compress v1.20.2
)

require (
	filippo.io/hpke v0.4.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
