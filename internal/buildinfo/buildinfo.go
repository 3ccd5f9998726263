// Package buildinfo reads what a binary was built from: the module's
// version and commit, and the Go and etcd versions it carries, from the
// build information Go embeds. It owns nothing else.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is a binary's build.
type Info struct {
	// Version is the module's version; "(devel)" for a build from a
	// work tree.
	Version string `json:"version"`
	// Commit is the VCS revision, with "-modified" when the work tree had
	// changes; "" when the build recorded none.
	Commit string `json:"commit,omitempty"`
	// Built is the commit's time, as the VCS gave it.
	Built string `json:"commit_time,omitempty"`
	Go    string `json:"go_version"`
	// Etcd is the version of etcd's server module built in.
	Etcd string `json:"etcd_version"`
}

// Read reads the running binary's build.
func Read() Info {
	info := Info{Version: "(unknown)", Go: runtime.Version(), Etcd: "(unknown)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.Version = bi.Main.Version
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.Built = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && info.Commit != "" {
		info.Commit += "-modified"
	}
	for _, d := range bi.Deps {
		if d.Path == "go.etcd.io/etcd/server/v3" {
			info.Etcd = d.Version
		}
	}
	return info
}
