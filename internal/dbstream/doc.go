// Package dbstream opens the stream of a live member's database (etcd's
// Maintenance.Snapshot) so that a refusal is an error when it opens, and a
// token the member has not applied yet is asked again. Package snapshot
// (whose fulls are these streams) and package upgrade (which reads the
// v3 membership in one) share it, so neither imports the other.
//
// It does not store, check or name what it streams.
package dbstream
