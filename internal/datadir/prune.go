package datadir

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/etcdkit/etcdkit/internal/database"
)

// asidePattern is the part of a moved-aside dir's name after the data
// dir's own: .bak-<UTC time> and, when a second held two, -<n>.
var asidePattern = regexp.MustCompile(`^\.bak-(\d{8}T\d{6}Z)(?:-(\d+))?$`)

// BuiltMarker is the file etcdkit leaves in a data dir it built (a
// restore, a rebuild, a join's empty dir), with the revision its database
// had then: while the database still has that revision, the dir holds
// nothing the backups or the cluster do not, so once moved aside it may be
// pruned. Once etcd has written to it, it may hold writes no backup has.
const BuiltMarker = "etcdkit-built.json"

// built is the marker's content.
type built struct {
	By       string `json:"built_by"`
	At       string `json:"at"`
	Revision *int64 `json:"revision"`
	// Files are the member dir's files as built: etcd writes its WAL
	// before its database (a write acknowledged and then killed is in the
	// WAL alone), and users, roles and leases change no key revision, so
	// the database's revision alone cannot tell that etcd ran.
	Files map[string]fileState `json:"files"`
}

// fileState is what a file was when the marker was left.
type fileState struct {
	Size     int64 `json:"size"`
	Modified int64 `json:"modified_unix_nano"`
}

// memberFiles are the files under dir/member, by their path below it.
func memberFiles(dir string) (map[string]fileState, error) {
	out := map[string]fileState{}
	root := filepath.Join(dir, "member")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return fs.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = fileState{Size: info.Size(), Modified: info.ModTime().UnixNano()}
		return nil
	})
	return out, err
}

// MarkBuilt leaves the marker in dir, saying what built it and the
// revision of its database (0 when it has none yet, as a join's).
func MarkBuilt(dir, by string, now time.Time) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	rev, err := dbRevision(dir)
	if err != nil {
		return fmt.Errorf("mark %s built: %w", dir, err)
	}
	files, err := memberFiles(dir)
	if err != nil {
		return fmt.Errorf("mark %s built: %w", dir, err)
	}
	b, err := json.Marshal(built{By: by, At: now.UTC().Format(time.RFC3339), Revision: &rev, Files: files})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, BuiltMarker), append(b, '\n'), 0o600)
}

// Built says whether dir holds the marker and nothing written since: its
// database (if any) still has the marker's revision, and every file of
// its member dir is as the marker saw it (none added, none changed). An
// unreadable marker or database, or a marker that recorded no files (an
// older etcdkit's), keeps the dir.
func Built(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, BuiltMarker))
	if err != nil {
		return false
	}
	var m built
	if json.Unmarshal(b, &m) != nil || m.Revision == nil || m.Files == nil {
		return false
	}
	rev, err := dbRevision(dir)
	if err != nil || rev != *m.Revision {
		return false
	}
	files, err := memberFiles(dir)
	return err == nil && maps.Equal(files, m.Files)
}

// dbRevision is the revision of dir's etcd database, 0 when it has none.
func dbRevision(dir string) (int64, error) {
	db := filepath.Join(dir, "member", "snap", "db")
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return database.Revision(db)
}

// Prune removes the oldest of dir's moved-aside dirs that built says
// etcdkit built until keep of those remain: 0 means 1, the default of
// every option that passes it on, and a negative keep keeps them all. A
// moved-aside dir etcdkit did not build (the cluster's own data, from
// before the first restore) is never removed, nor is just, the one a
// caller has just made, which counts as the newest. Only names MoveAside
// makes are considered, so an operator's own copy beside the data dir is
// never touched. built nil is Built.
func Prune(dir string, keep int, just string, built func(aside string) bool) (removed []string, err error) {
	switch {
	case keep < 0:
		return nil, nil
	case keep == 0:
		keep = 1
	}
	if built == nil {
		built = Built
	}
	type aside struct {
		path, stamp string
		n           int
	}
	matches, err := filepath.Glob(dir + ".bak-*")
	if err != nil {
		return nil, err
	}
	var asides []aside
	for _, p := range matches {
		m := asidePattern.FindStringSubmatch(p[len(dir):])
		if m == nil || p == just || !built(p) {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		asides = append(asides, aside{p, m[1], n})
	}
	// Newest first; the just-made one already holds a place.
	slices.SortFunc(asides, func(a, b aside) int {
		return cmp.Or(cmp.Compare(b.stamp, a.stamp), cmp.Compare(b.n, a.n))
	})
	if just != "" {
		keep--
	}
	for _, a := range asides[min(keep, len(asides)):] {
		if err := os.RemoveAll(a.path); err != nil {
			return removed, fmt.Errorf("prune moved-aside dir %s: %w", a.path, err)
		}
		removed = append(removed, a.path)
	}
	return removed, nil
}

// Companion is the built test of a wal-dir's moved-aside dirs: a WAL
// moved aside with its data dir goes with it, and stays while that data
// dir, which etcdkit did not build, stays.
func Companion(walDir, dataDir string) func(aside string) bool {
	return func(aside string) bool {
		pair := dataDir + aside[len(walDir):]
		if _, err := os.Stat(pair); os.IsNotExist(err) {
			return true
		}
		return Built(pair)
	}
}
