// Package database reads an etcd database file (bbolt's format, version 2)
// without bbolt: the pages a lookup or a cursor walks, read from the file,
// each bound checked, so a damaged page is an error that names the file and
// never a crash. It reads what etcdkit's leaves need of a database: its
// revision the way etcd's mvcc store reads it when it opens one, a bucket's
// keys from either end, and the key bucket's values.
//
// Package validate (which judges a data dir) and package snapshot (which
// names and checks full snapshots) share it, so neither imports the other,
// and an embedder of the on-store format does not link bbolt.
//
// It reads; it never writes, and it checks nothing a reader does not walk:
// the freelist and the pages no lookup reaches are validate's.
package database
