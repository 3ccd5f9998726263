// Package etcdversion names etcd releases and the steps etcd allows
// between them: the minors etcdkit runs (3.5, 3.6 and 3.7), one minor at
// a time, as etcd itself requires of a member joining a cluster or
// starting on another release's data.
//
// It owns the version type and its comparisons. It does not judge a data
// dir (package validate does, with these comparisons) or a cluster
// (package startup does), and it reads no etcd: the standard library
// only, so that any package may name a version.
package etcdversion
