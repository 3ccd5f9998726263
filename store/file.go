package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/etcdkit/etcdkit/internal/scratch"
	"github.com/etcdkit/etcdkit/store/internal/xfer"
)

// tempPrefix starts the name of a file being written. List never shows such
// files, so a Put that fails, or a process killed during a Put, leaves
// nothing visible.
const tempPrefix = ".etcdkit-tmp-"

// File is a store in a directory of the local file system. Objects are files
// under the directory; a key's slashes are subdirectories.
type File struct {
	root string
	url  string
}

func openFile(_ context.Context, u *url.URL, _ Options) (Store, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("store %s: file URLs name a local path: write file:///abs/path (three slashes)", u.Redacted())
	}
	if err := NewQuery(u).Unused(); err != nil {
		return nil, fmt.Errorf("store %s: %w", u.Redacted(), err)
	}
	return NewFile(filepath.FromSlash(u.Path))
}

// NewFile returns a store rooted at dir. The directory is created by the
// first write, not here: a command that only reads a mistyped path must
// not leave a directory behind (see Exists).
func NewFile(dir string) (*File, error) {
	if dir == "" {
		return nil, errors.New("store file://: no directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store file://%s: %w", dir, err)
	}
	return &File{root: abs, url: "file://" + escapePath(filepath.ToSlash(abs))}, nil
}

func (f *File) String() string { return f.url }

// Exists reports whether the store's directory exists: a store nothing
// was ever written to lists empty, and a reader that needs to tell a
// fresh store from a mistyped path asks this.
func (f *File) Exists(context.Context) (bool, error) {
	info, err := os.Stat(f.root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("store %s: %w", f.url, err)
	case !info.IsDir():
		return false, fmt.Errorf("store %s: %s is not a directory", f.url, f.root)
	}
	return true, nil
}

func (f *File) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", fmt.Errorf("store %s: %w", f.url, err)
	}
	if strings.HasPrefix(path.Base(key), tempPrefix) {
		return "", fmt.Errorf("store %s: %w: %q starts with %s, which this store keeps for files being written", f.url, ErrInvalidKey, key, tempPrefix)
	}
	return filepath.Join(f.root, filepath.FromSlash(key)), nil
}

// Put writes to a temporary file in the target directory, syncs it, links
// it to the key and syncs the directory, so the object is either complete
// or absent after a crash, and a key that exists is never replaced.
func (f *File) Put(ctx context.Context, key string, r io.Reader) (err error) {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("store %s: put %s: %w", f.url, key, err)
	}
	// scratch: the temporary files of writers that died are removed here.
	tmp, err := scratch.File(dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("store %s: put %s: %w", f.url, key, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, xfer.ContextReader(ctx, r)); err != nil {
		return fmt.Errorf("store %s: put %s: %w", f.url, key, err)
	}
	return f.commit(ctx, key, tmp, p)
}

// commit syncs and closes a complete temporary file and makes it p, the
// path of key, only if p does not exist, then syncs the directory.
func (f *File) commit(ctx context.Context, key string, tmp *os.File, p string) error {
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("store %s: put %s: sync: %w", f.url, key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("store %s: put %s: %w", f.url, key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store %s: put %s: %w", f.url, key, err)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("store %s: put %s: %w", f.url, key, err)
	}
	if err := createOnly(tmp.Name(), p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = ErrExists
		}
		return fmt.Errorf("store %s: put %s: %w", f.url, key, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("store %s: put %s: sync directory: %w", f.url, key, err)
	}
	return nil
}

// createOnly moves the file tmp to p unless p exists: a hard link fails
// when p exists, atomically, where a rename would replace it. A file
// system without hard links gets a check before the rename, which two
// writers at once can race.
func createOnly(tmp, p string) error {
	err := os.Link(tmp, p)
	if err == nil || errors.Is(err, fs.ErrExist) {
		_ = os.Remove(tmp)
		return err
	}
	if _, serr := os.Lstat(p); serr == nil {
		_ = os.Remove(tmp)
		return fs.ErrExist
	}
	return os.Rename(tmp, p)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *File) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	p, err := f.path(key)
	if err != nil {
		return nil, err
	}
	fh, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscallENOTDIR) {
		return nil, fmt.Errorf("store %s: get %s: %w", f.url, key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: get %s: %w", f.url, key, err)
	}
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		_ = fh.Close()
		return nil, fmt.Errorf("store %s: get %s: %w", f.url, key, ErrNotFound)
	}
	return fh, nil
}

// List walks only the directory the prefix reaches into, so listing one
// cluster's snapshots does not read the rest of a shared tree.
func (f *File) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("store %s: %w", f.url, err)
	}
	start := f.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(f.root, filepath.FromSlash(prefix[:i]))
	}
	var objs []Object
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		rel, err := filepath.Rel(f.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we walked
		}
		if err != nil {
			return err
		}
		objs = append(objs, Object{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: list %q: %w", f.url, prefix, err)
	}
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return objs, nil
}

func (f *File) Delete(_ context.Context, key string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscallENOTDIR) {
		return fmt.Errorf("store %s: delete %s: %w", f.url, key, err)
	}
	return nil
}

// Sweeper is implemented by stores whose writers leave temporary files
// behind when they are killed mid-write (file://): Sweep removes those
// whose writer is gone (their lock is free and they are a few seconds
// old), never a live writer's. Retention and a Snapshotter's start call
// it.
type Sweeper interface {
	Sweep()
}

// AsSweeper returns st's Sweeper, looking through its views.
func AsSweeper(st Store) (Sweeper, bool) {
	sw, _, ok := as[Sweeper](st)
	return sw, ok
}

// Sweep removes the temporary files of dead writers in every directory of
// the store.
func (f *File) Sweep() {
	_ = filepath.WalkDir(f.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			scratch.Sweep(p, tempPrefix)
		}
		return nil
	})
}

// Stager is implemented by stores that keep objects as local files. A
// producer that writes an object to a local file anyway writes it to a
// staged file, which becomes the object by a rename instead of a copy.
// Staged files are never listed.
type Stager interface {
	// Stage creates an empty staged file.
	Stage() (*os.File, error)
	// PutStaged syncs and closes f, a file from Stage, and makes it the
	// object key, as Put would.
	PutStaged(ctx context.Context, key string, f *os.File) error
}

// AsStager returns st's Stager, looking through its views: a staged file
// becomes the object under the views' keys.
func AsStager(st Store) (Stager, bool) {
	stager, prefix, ok := as[Stager](st)
	if !ok || prefix == "" {
		return stager, ok
	}
	return prefixedStager{stager, prefix}, true
}

type prefixedStager struct {
	Stager
	prefix string
}

func (p prefixedStager) PutStaged(ctx context.Context, key string, f *os.File) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return p.Stager.PutStaged(ctx, JoinKey(p.prefix, key), f)
}

// Stage creates the file in the store's directory, so renaming it into
// place never crosses a file system.
func (f *File) Stage() (*os.File, error) {
	if err := os.MkdirAll(f.root, 0o750); err != nil {
		return nil, fmt.Errorf("store %s: create the directory: %w", f.url, err)
	}
	tmp, err := scratch.File(f.root, tempPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("store %s: stage: %w", f.url, err)
	}
	return tmp, nil
}

// PutStaged makes a staged file the object key; on failure the staged
// file is removed.
func (f *File) PutStaged(ctx context.Context, key string, tmp *os.File) (err error) {
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	p, err := f.path(key)
	if err != nil {
		return err
	}
	if filepath.Dir(tmp.Name()) != f.root || !strings.HasPrefix(filepath.Base(tmp.Name()), tempPrefix) {
		return fmt.Errorf("store %s: put %s: %s is not a file this store staged", f.url, key, tmp.Name())
	}
	return f.commit(ctx, key, tmp, p)
}

// Local is implemented by stores whose objects are local files, which a
// reader that needs a file (etcdutl reads a database from a path) can use
// in place instead of copying.
type Local interface {
	// Path is the file that holds the object key.
	Path(key string) (string, error)
}

// AsLocal returns st's Local, looking through its views.
func AsLocal(st Store) (Local, bool) {
	local, prefix, ok := as[Local](st)
	if !ok || prefix == "" {
		return local, ok
	}
	return prefixedLocal{local, prefix}, true
}

type prefixedLocal struct {
	Local
	prefix string
}

func (p prefixedLocal) Path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return p.Local.Path(JoinKey(p.prefix, key))
}

// Path is the file of key; it need not exist.
func (f *File) Path(key string) (string, error) { return f.path(key) }
