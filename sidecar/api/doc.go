// Package api is the sidecar's HTTP API as its callers see it: the
// request and answer types, and Client. It imports the standard library
// and package tlsfiles only, so a program that calls a sidecar (a wrapper
// that leaves its data dir to the sidecar, an operator's tool) does not
// carry the etcd server, bbolt or the store SDKs.
//
// The server side (the handlers, their jobs and metrics) is package
// sidecar's.
package api
