package reload

import (
	"log/slog"
	"os"
	"sync"
)

// File is a value loaded from files, loaded again when one changes.
type File[T any] struct {
	paths []string
	load  func() (T, error)
	log   *slog.Logger

	mu     sync.Mutex
	seen   []os.FileInfo // the files as they were when cur was loaded
	failed []os.FileInfo // the files as they were when a load last failed
	cur    T
	loaded bool
}

// New returns a File whose value load reads from paths. Nothing is read
// before the first Get. A nil logger discards.
func New[T any](load func() (T, error), log *slog.Logger, paths ...string) *File[T] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &File[T]{paths: paths, load: load, log: log}
}

// Get returns the value, loading it first when the files changed since
// the last load. Once a value has loaded, a change that does not load, or
// files that are briefly missing, keep the last good value: a rotation in
// progress must not break connections that need it.
func (f *File[T]) Get() (T, error) {
	infos := make([]os.FileInfo, len(f.paths))
	var statErr error
	for i, p := range f.paths {
		if infos[i], statErr = os.Stat(p); statErr != nil {
			break
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if statErr != nil {
		if f.loaded {
			return f.cur, nil
		}
		// The loader's own error names the file for the user.
		return f.load()
	}
	if f.loaded && same(infos, f.seen) {
		return f.cur, nil
	}
	v, err := f.load()
	if err != nil {
		if !f.loaded {
			return v, err
		}
		if !same(infos, f.failed) {
			f.failed = infos
			f.log.Warn("a changed file does not load; the previous one is kept until it is fixed", "files", f.paths, "error", err)
		}
		return f.cur, nil
	}
	if f.loaded {
		f.log.Info("reloaded changed files", "files", f.paths)
	}
	f.cur, f.seen, f.failed, f.loaded = v, infos, nil, true
	return v, nil
}

// same says whether two sets of file infos describe the same files,
// unchanged.
func same(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i, x := range a {
		y := b[i]
		if y == nil || !os.SameFile(x, y) || !x.ModTime().Equal(y.ModTime()) || x.Size() != y.Size() {
			return false
		}
	}
	return true
}
