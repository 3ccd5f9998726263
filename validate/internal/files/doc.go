// Package files reads the files of an etcd data dir the way package
// validate needs: the bbolt file's meta pages and reachable pages without
// bbolt (whose assertions panic, some in goroutines no recover reaches),
// the WAL's records, and the snap files. Every reader turns damage into an
// error.
//
// It is a package of its own so its fuzz tests link no etcd server: fuzz
// coverage over a binary that does runs at a few executions a minute.
package files
