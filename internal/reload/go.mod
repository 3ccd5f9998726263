module github.com/etcdkit/etcdkit/internal/reload

go 1.26.0
