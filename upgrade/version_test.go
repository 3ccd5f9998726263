package upgrade

import "testing"

// The versions etcd's upgrade notes name: 3.6 starts from 3.5.26 on.
func TestVersionThresholds(t *testing.T) {
	for v, want := range map[string]Status{
		"3.4.37": Fail, "3.5.0": Fail, "3.5.25": Fail, "3.5.26": Pass, "3.5.35": Pass, "3.6.7": Pass, "3.7.3": Pass,
		"v3.5.21-rc.0": Fail, "three": Unread,
	} {
		if got := version("m", v); got.Status != want || (want == Pass) != (got.Fix == "") {
			t.Errorf("etcd %s: %+v, want %s", v, got, want)
		}
	}
}
