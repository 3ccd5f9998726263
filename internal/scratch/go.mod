module github.com/etcdkit/etcdkit/internal/scratch

go 1.26.0

require golang.org/x/sys v0.49.0
