// Package files reads the files of an etcd data dir the way package
// validate needs: the bbolt file's meta pages and reachable pages without
// bbolt (whose assertions panic, some in goroutines no recover reaches),
// the WAL's records with a decoder of our own, and the snap files, decoded
// here too (as etcd's snap.Read judges them, which a test holds it to), so
// that checking a data dir needs no etcd server packages. Every reader
// turns damage into an error.
//
// Its fuzz targets take their input as bytes, not files. Run them with a
// short minimization, as in
//
//	go test ./validate/internal/files -fuzz FuzzWalkPages -fuzzminimizetime 1s
//
// because the fuzzer spends up to a minute shrinking each new input, and
// a database page run is large: with the default it executes a few
// inputs a minute.
package files
