package cli

import (
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/etcdversion"
)

// releaseFlag is an etcd release given on the command line: 3.5, 3.6.16;
// one etcdkit runs.
type releaseFlag struct{ v *etcdversion.Version }

func (r releaseFlag) String() string {
	if r.v == nil || r.v.IsZero() {
		return ""
	}
	return r.v.String()
}

func (r releaseFlag) Set(s string) error {
	v, err := etcdversion.Parse(s)
	if err == nil {
		err = etcdversion.CheckSupported(v)
	}
	if err != nil {
		return err
	}
	*r.v = v
	return nil
}

func (releaseFlag) Type() string { return "3.5|3.6|3.7" }

// Release registers a flag of an etcd release.
func Release(f *pflag.FlagSet, v *etcdversion.Version, name, usage string) {
	f.Var(releaseFlag{v}, name, usage)
}
