package etcdversion

import "runtime/debug"

// Linked is the etcd release the running program is built with: the
// version its build information records of etcd's api or server module.
// A program that links no etcd (one that only checks data dirs) gets the
// newest release etcdkit runs.
func Linked() Version {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			if m.Path != "go.etcd.io/etcd/api/v3" && m.Path != "go.etcd.io/etcd/server/v3" {
				continue
			}
			if v, err := Parse(m.Version); err == nil {
				return v
			}
		}
	}
	return Supported[len(Supported)-1]
}
