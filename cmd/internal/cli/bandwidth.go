package cli

import (
	"fmt"

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

// minBandwidth is the least cap taken: below it a transfer's next bytes
// wait longer than a store's timeout lets it stand still.
const minBandwidth = 64 << 10

// Check refuses a cap below 64 KiB a second.
func (b Bandwidth) Check() error {
	for _, c := range []struct {
		flag string
		v    Bytes
	}{{"upload-limit", b.Upload}, {"download-limit", b.Download}} {
		if c.v != 0 && c.v < minBandwidth {
			return Usage(fmt.Errorf("--%s %s: 64KiB (a second) or more, or 0 for none: below it a transfer stands still longer than the store's timeout allows", c.flag, c.v.String()))
		}
	}
	return nil
}

// Limits are the caps, shared by the stores Limit wraps; nil when none.
func (b Bandwidth) Limits() *store.Limits {
	if b.Upload == 0 && b.Download == 0 {
		return nil
	}
	return store.NewLimits(int64(b.Upload), int64(b.Download))
}
