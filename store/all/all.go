// Package all registers every store backend etcdkit ships: importing it
// (for its side effect) makes store.Open take file://, mem://, s3://,
// gs://, azblob:// and swift:// URLs. The reference binaries import it;
// a program that needs one backend imports that backend alone and links
// no other cloud SDK.
//
// It owns no code of its own: the backends are store/s3, store/gcs,
// store/azure and store/swift, each registered by its own init.
package all

import (
	// Every backend registers its URL scheme with package store.
	_ "github.com/etcdkit/etcdkit/store/azure"
	_ "github.com/etcdkit/etcdkit/store/gcs"
	_ "github.com/etcdkit/etcdkit/store/s3"
	_ "github.com/etcdkit/etcdkit/store/swift"
)
