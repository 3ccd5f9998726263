package upgrade

import (
	"testing"

	"github.com/etcdkit/etcdkit/etcdversion"
)

// The versions etcd's upgrade notes name: 3.6 starts from 3.5.26 on.
// Other steps ask no patch release.
func TestVersionThresholds(t *testing.T) {
	to36 := etcdversion.MustParse("3.6")
	for v, want := range map[string]Status{
		"3.4.37": Fail, "3.5.0": Fail, "3.5.25": Fail, "3.5.26": Pass, "3.5.35": Pass, "3.6.7": Pass, "3.7.3": Pass,
		"v3.5.21-rc.0": Fail, "three": Unread,
	} {
		if got := version("m", v, to36); got.Status != want || (want == Pass) != (got.Fix == "") {
			t.Errorf("etcd %s: %+v, want %s", v, got, want)
		}
	}
	if got := version("m", "3.6.1", etcdversion.MustParse("3.7")); got.Status != Pass {
		t.Errorf("etcd 3.6.1 stepping to 3.7: %+v", got)
	}
}

// The step is one minor, from the one release every member runs, to a
// release etcdkit runs; the next one unless told.
func TestStep(t *testing.T) {
	v := etcdversion.MustParse
	for _, tc := range []struct {
		name     string
		members  []string
		to       string
		want     Status
		from, at string
	}{
		{"up from 3.5", []string{"3.5.35", "3.5.27"}, "", Pass, "3.5", "3.6"},
		{"up from 3.6", []string{"3.6.16"}, "", Pass, "3.6", "3.7"},
		{"down from 3.6", []string{"3.6.16"}, "3.5", Pass, "3.6", "3.5"},
		{"two minors", []string{"3.5.35"}, "3.7", Fail, "3.5", "3.7"},
		{"a step under way", []string{"3.5.35", "3.6.16"}, "", Fail, "3.5", ""},
		{"the newest", []string{"3.7.3"}, "", Unread, "3.7", ""},
		{"not etcdkit's", []string{"3.7.3"}, "3.8", Fail, "3.7", "3.8"},
		{"nobody told", nil, "", Unread, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var vs []etcdversion.Version
			for _, m := range tc.members {
				vs = append(vs, v(m))
			}
			var o Options
			if tc.to != "" {
				o.To = v(tc.to)
			}
			f, from, to := step(vs, o)
			got := func(x etcdversion.Version) string {
				if x.IsZero() {
					return ""
				}
				return x.MinorString()
			}
			if f.Status != tc.want || got(from) != tc.from || got(to) != tc.at {
				t.Fatalf("%+v from %q to %q; want %s from %q to %q", f, got(from), got(to), tc.want, tc.from, tc.at)
			}
			t.Log(f.Detail)
		})
	}
}
