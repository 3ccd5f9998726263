// Package store is the object store contract of etcdkit: a flat key space of
// immutable objects with four operations (Put, Get, List, Delete), opened
// from a URL.
//
// It owns the contract and its rules — keys are relative slash paths under
// the URL's prefix, an object becomes visible only once it is complete, a
// failed or cancelled Put leaves nothing that List shows, a missing object is
// ErrNotFound, deleting a missing object is not an error — the registry of URL
// schemes, and two backends: file:// (a directory on disk, written through
// temporary files renamed into place) and mem:// (process memory, for tests
// and examples).
//
// A producer that builds an object in a local file anyway (a full
// snapshot spools the database to read its revision) can ask AsStager for
// a Stager: the file store then takes such a file by renaming it instead of
// copying it.
//
// A backend that copies objects on its server is a Copier (CopyObject
// falls back to Get and Put elsewhere). Write-once locks are the
// backends' to report: a delete a lock refuses is ErrLocked, and
// ExcludeTag is the mark by which an operator takes an object out of a
// locked bucket's listing.
//
// Cloud backends live in their own packages (store/s3, store/gcs,
// store/azure, store/swift) and register their scheme when imported; store/storetest is
// the one conformance suite every backend passes.
//
// It does not know what the objects mean: snapshot names, chains and codecs
// belong to package snapshot.
package store
