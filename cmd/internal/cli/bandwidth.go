package cli

import (
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/store"
)

// Bandwidth is the caps of a command that moves backups to and from its
// stores, in bytes a second (0: none).
type Bandwidth struct {
	Upload, Download Bytes
}

// Flags adds --upload-limit (with upload) and --download-limit.
func (b *Bandwidth) Flags(fs *pflag.FlagSet, upload bool) {
	if upload {
		fs.Var(&b.Upload, "upload-limit", "most bytes a second written to the stores, every upload together (20MiB, …; 0: no limit)")
	}
	fs.Var(&b.Download, "download-limit", "most bytes a second read from the stores, every download together (0: no limit)")
}

// Limits are the caps, shared by the stores Limit wraps.
func (b Bandwidth) Limits() *store.Limits {
	return store.NewLimits(int64(b.Upload), int64(b.Download))
}
