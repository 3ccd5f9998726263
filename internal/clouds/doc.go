// Package clouds holds the library's tests against the object stores'
// emulators: the Snapshotter's chains, uploaders and write-once buckets,
// retention with pins, deletes and a second site's own policy,
// and the fleet's scan, on S3, GCS, Azure and Swift. The stores' own
// contract is checked in each backend's module (store/storetest); these
// are the library's flows over them.
//
// It is a module of its own so that the cloud SDKs stay out of the
// library's go.mod, which every embedder's module graph takes.
package clouds
