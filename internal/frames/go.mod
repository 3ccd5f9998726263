module github.com/etcdkit/etcdkit/internal/frames

go 1.26.0

require github.com/klauspost/compress v1.20.2
