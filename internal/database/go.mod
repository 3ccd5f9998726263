module github.com/etcdkit/etcdkit/internal/database

go 1.26.0
