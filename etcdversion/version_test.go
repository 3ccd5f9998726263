package etcdversion

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]Version{
		"3.5.35": {3, 5, 35}, "v3.6.16": {3, 6, 16}, "3.7": {3, 7, 0}, "3.6.0-rc.1": {3, 6, 0}, " 3.5.0\n": {3, 5, 0},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "3", "3.x.1", "3.5.1.2", "three", "3.-1.0"} {
		if v, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, v)
		}
	}
}

func TestOrder(t *testing.T) {
	a, b, c := MustParse("3.5.35"), MustParse("3.6.0"), MustParse("3.6.16")
	if !a.Less(b) || !b.Less(c) || c.Less(b) || a.Compare(a) != 0 {
		t.Error("3.5.35 < 3.6.0 < 3.6.16 does not hold")
	}
	if a.Steps(c) != 1 || c.Steps(a) != -1 || b.Steps(c) != 0 || a.Steps(Version{4, 0, 0}) < 2 {
		t.Errorf("steps: 3.5→3.6 %d, 3.6→3.5 %d, 3.6→3.6 %d", a.Steps(c), c.Steps(a), b.Steps(c))
	}
	if a.Next() != (Version{3, 6, 0}) || c.Previous() != (Version{3, 5, 0}) || c.Trim() != b {
		t.Error("Next, Previous or Minor is wrong")
	}
	if a.String() != "3.5.35" || a.MinorString() != "3.5" {
		t.Errorf("String %q, MinorString %q", a, a.MinorString())
	}
}

func TestSupported(t *testing.T) {
	for _, v := range []string{"3.5.0", "3.6.16", "3.7.3"} {
		if err := CheckSupported(MustParse(v)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"3.4.37", "3.8.0", "4.0.0"} {
		if err := CheckSupported(MustParse(v)); err == nil {
			t.Errorf("%s is taken as supported", v)
		}
	}
	if got := Names(Supported); got != "3.5, 3.6 and 3.7" {
		t.Errorf("Names = %q", got)
	}
	if got := Either(Supported[:2]); got != "3.5 or 3.6" {
		t.Errorf("Either = %q", got)
	}
}
