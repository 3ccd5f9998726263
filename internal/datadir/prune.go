package datadir

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
)

// asidePattern is the part of a moved-aside dir's name after the data
// dir's own: .bak-<UTC time> and, when a second held two, -<n>.
var asidePattern = regexp.MustCompile(`^\.bak-(\d{8}T\d{6}Z)(?:-(\d+))?$`)

// Prune removes the oldest of dir's moved-aside data dirs until keep
// remain: 0 means 1, the default of every option that passes it on, and
// a negative keep keeps them all. just, the one a caller has just made,
// is never removed and counts as the newest. Only names MoveAside makes
// are considered, so an operator's own copy beside the data dir is never
// touched.
func Prune(dir string, keep int, just string) (removed []string, err error) {
	switch {
	case keep < 0:
		return nil, nil
	case keep == 0:
		keep = 1
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
		if m == nil || p == just {
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
			return removed, fmt.Errorf("prune moved-aside data dir %s: %w", a.path, err)
		}
		removed = append(removed, a.path)
	}
	return removed, nil
}
