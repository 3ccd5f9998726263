package datadir

import "os"

// WritebackFile is a file being written from start to end, such as a
// database being restored, that is synced once at the end. Every
// WritebackEvery bytes it starts writing what came before to disk, so
// the disk works while the writer does instead of all at the fsync.
// It is a plain io.Writer: an embedded *os.File would hand io.Copy its
// ReadFrom, which bypasses Write.
type WritebackFile struct {
	f            *os.File
	off, started int64
}

// WritebackEvery is how much a WritebackFile lets accumulate before it
// starts writing it back.
const WritebackEvery = 16 << 20

// NewWritebackFile wraps a file opened for writing at offset 0.
func NewWritebackFile(f *os.File) *WritebackFile { return &WritebackFile{f: f} }

func (w *WritebackFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.started >= WritebackEvery {
		startWriteback(w.f, w.started, w.off-w.started)
		w.started = w.off
	}
	return n, err
}

// StartWriteback starts writing all of f's dirty pages to disk without
// waiting for them, for a file written in place (a database that commits
// without fsync) that is synced once at the end.
func StartWriteback(f *os.File) { startWriteback(f, 0, 0) }
