package files

import "io"

// CheckSnap, Walk and DecodeWAL are the checks the tests beside etcd's
// own writers call (validate/internal/withetcd, a module of its own so
// that etcd's server stays out of validate's).

// CheckSnap checks one snap file's bytes.
func CheckSnap(b []byte) error { return checkSnap(b) }

// Walk walks a database's pages from its meta pages.
func Walk(data []byte) error { return walk(data, nil) }

// DecodeWAL decodes one WAL file's records; last: it is the newest file.
func DecodeWAL(r io.Reader, size int64, last bool) error {
	return (&walDecoder{}).decode(r, size, last)
}
