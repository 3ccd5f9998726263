module github.com/etcdkit/etcdkit/sidecar/api

go 1.26.0

replace github.com/etcdkit/etcdkit => ../..

replace github.com/etcdkit/etcdkit/internal/reload => ../../internal/reload

replace github.com/etcdkit/etcdkit/tlsfiles => ../../tlsfiles

require github.com/etcdkit/etcdkit/tlsfiles v0.0.0-00010101000000-000000000000

require github.com/etcdkit/etcdkit/internal/reload v0.0.0-00010101000000-000000000000 // indirect
