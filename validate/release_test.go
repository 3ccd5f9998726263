package validate

import (
	"slices"
	"testing"

	"github.com/etcdkit/etcdkit/etcdversion"
)

// Which releases start on a data dir, by the facts it holds, as etcd
// judges them at start and by its one minor step.
func TestReleaseStarts(t *testing.T) {
	v := etcdversion.MustParse
	for _, tc := range []struct {
		name string
		r    Release
		want []string
	}{
		{"no facts yet", Release{}, []string{"3.5", "3.6", "3.7"}},
		{"a 3.5 cluster's", Release{Cluster: v("3.5.0")}, []string{"3.5", "3.6"}},
		{"a new 3.5 cluster's, at etcd's floor", Release{Cluster: v("3.0.0"), V2Entries: 4}, []string{"3.5", "3.6"}},
		{"a 3.5 cluster's, its WAL in 3.5's v2 form", Release{Cluster: v("3.5.0"), V2Entries: 4, FirstV2: 5}, []string{"3.5", "3.6"}},
		{"a 3.5 cluster's, its WAL writing the v2 store", Release{Cluster: v("3.5.0"), V2Entries: 4, V2Custom: 1}, []string{"3.5"}},
		{"a 3.6 cluster's", Release{Cluster: v("3.6.0"), Storage: v("3.6.0")}, []string{"3.6", "3.7"}},
		{"a 3.6 cluster's, still with 3.5's v2 entries", Release{Cluster: v("3.6.0"), Storage: v("3.6.0"), V2Entries: 2}, []string{"3.6"}},
		{"a 3.7 cluster's", Release{Cluster: v("3.7.0"), Storage: v("3.7.0")}, []string{"3.7"}},
		{"stepped down to 3.5 (downgrade API)", Release{Cluster: v("3.5.0"), Downgrade: v("3.5.0")}, []string{"3.5", "3.6"}},
		{"downgrade enabled, storage not migrated yet", Release{Cluster: v("3.5.0"), Storage: v("3.6.0"), Downgrade: v("3.5.0")}, []string{"3.6"}},
		{"a 3.7 backup restored by etcd 3.5", Release{Cluster: v("3.5.0"), Storage: v("3.7.0"), V2Entries: 2}, []string{"3.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range tc.r.Starts() {
				got = append(got, s.MinorString())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("%s: started by %v, want %v", tc.r, got, tc.want)
			}
			for _, s := range etcdversion.Supported {
				if why := tc.r.Refuses(s); (why == "") != slices.Contains(tc.want, s.MinorString()) {
					t.Fatalf("etcd %s: %q", s, why)
				} else if why != "" {
					t.Logf("etcd %s: %s", s.MinorString(), why)
				}
			}
		})
	}
}
