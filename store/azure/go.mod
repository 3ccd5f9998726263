module github.com/etcdkit/etcdkit/store/azure

go 1.26.0

replace github.com/etcdkit/etcdkit => ../..

replace github.com/etcdkit/etcdkit/internal/reload => ../../internal/reload

replace github.com/etcdkit/etcdkit/internal/scratch => ../../internal/scratch

replace github.com/etcdkit/etcdkit/sidecar/api => ../../sidecar/api

replace github.com/etcdkit/etcdkit/store => ../../store

replace github.com/etcdkit/etcdkit/tlsfiles => ../../tlsfiles

require (
	github.com/Azure/azure-sdk-for-go/sdk/azcore v1.24.0
	github.com/Azure/azure-sdk-for-go/sdk/azidentity v1.15.0
	github.com/Azure/azure-sdk-for-go/sdk/storage/azblob v1.8.3
	github.com/etcdkit/etcdkit v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/internal/reload v0.0.0-00010101000000-000000000000
	github.com/etcdkit/etcdkit/store v0.0.0-00010101000000-000000000000
)

require (
	github.com/Azure/azure-sdk-for-go/sdk/internal v1.13.0 // indirect
	github.com/Azure/azure-sdk-for-go/sdk/storage/internal v0.1.0 // indirect
	github.com/AzureAD/microsoft-authentication-library-for-go v1.10.1 // indirect
	github.com/apache/arrow-go/v18 v18.7.0 // indirect
	github.com/etcdkit/etcdkit/internal/scratch v0.0.0-00010101000000-000000000000 // indirect
	github.com/goccy/go-json v0.10.6 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/google/flatbuffers v25.12.19+incompatible // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.20.2 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.28 // indirect
	github.com/pkg/browser v0.0.0-20240102092130-5ac0b6a4141c // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/exp v0.0.0-20260813180055-c1d0aacb2297 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/etcdkit/etcdkit/etcdversion => ../../etcdversion

replace github.com/etcdkit/etcdkit/validate => ../../validate

replace github.com/etcdkit/etcdkit/internal/database => ../../internal/database

replace github.com/etcdkit/etcdkit/internal/frames => ../../internal/frames

replace github.com/etcdkit/etcdkit/snapshot => ../../snapshot
