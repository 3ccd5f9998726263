package restore

import (
	"fmt"

	"go.etcd.io/etcd/api/v3/version"

	"github.com/etcdkit/etcdkit/etcdversion"
)

// Module is the etcd release this module is built with: what a restore
// writes for unless told otherwise.
var Module = etcdversion.MustParse(version.Version)

// checkRelease says why a restore cannot write for release e.
func checkRelease(e etcdversion.Version) error {
	if err := etcdversion.CheckSupported(e); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}
