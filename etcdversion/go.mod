module github.com/etcdkit/etcdkit/etcdversion

go 1.26.0
