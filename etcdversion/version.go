package etcdversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is an etcd release: 3.5.35. A version read where etcd keeps
// only the minor (a cluster version, a storage version) has patch 0.
type Version struct {
	Major, Minor, Patch int
}

// Supported are the minors etcdkit runs, reads and restores for, oldest
// first.
var Supported = []Version{{3, 5, 0}, {3, 6, 0}, {3, 7, 0}}

// Parse reads a version as etcd writes it: 3.5.35, v3.5.35, 3.5 (a
// minor), 3.6.0-rc.1 (the pre-release is dropped).
func Parse(s string) (Version, error) {
	core, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(s), "v"), "-")
	core, _, _ = strings.Cut(core, "+")
	parts := strings.Split(core, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("etcd version %q: not major.minor.patch", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("etcd version %q: not major.minor.patch", s)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

// MustParse is Parse for versions known to parse.
func MustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// IsZero says the version is unknown or not set.
func (v Version) IsZero() bool { return v == Version{} }

// String is major.minor.patch.
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is major.minor, as etcd's steps count.
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Trim is the version's minor, patch 0: what etcd compares a cluster's
// and a storage's version by.
func (v Version) Trim() Version { return Version{v.Major, v.Minor, 0} }

// Compare is -1, 0 or +1 as v is before, the same as or after w.
func (v Version) Compare(w Version) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		switch {
		case d < 0:
			return -1
		case d > 0:
			return 1
		}
	}
	return 0
}

// Less says v is before w.
func (v Version) Less(w Version) bool { return v.Compare(w) < 0 }

// Steps counts the minors from v to w: 1 from 3.5 to 3.6, -1 back. Versions
// of different majors are far apart.
func (v Version) Steps(w Version) int {
	if v.Major != w.Major {
		return 1000 * (w.Major - v.Major)
	}
	return w.Minor - v.Minor
}

// Next and Previous are the minors after and before v's.
func (v Version) Next() Version     { return Version{v.Major, v.Minor + 1, 0} }
func (v Version) Previous() Version { return Version{v.Major, v.Minor - 1, 0} }

// Decided says whether a cluster version v names a release the members
// agreed on: etcd runs a new cluster at 3.0 (its MinClusterVersion) until
// every member told its own, and has no other use for a version before
// 3.5 that etcdkit runs.
func Decided(v Version) bool { return !v.IsZero() && !v.Less(Supported[0]) }

// CheckSupported says why etcdkit does not run v, nil when it does.
func CheckSupported(v Version) error {
	for _, s := range Supported {
		if s.Trim() == v.Trim() {
			return nil
		}
	}
	return fmt.Errorf("etcd %s is not a release etcdkit runs: it runs %s", v, Names(Supported))
}

// Names lists the minors of vs: "3.5, 3.6 and 3.7".
func Names(vs []Version) string { return list(vs, "and") }

// Either lists the minors of vs as choices: "3.5 or 3.6".
func Either(vs []Version) string { return list(vs, "or") }

func list(vs []Version, conj string) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.MinorString()
	}
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}
