package buildinfo

import (
	"runtime"
	"testing"
)

// A test binary carries build information too; it links no etcd server,
// which the binaries' own tests check.
func TestRead(t *testing.T) {
	info := Read()
	if info.Go != runtime.Version() || info.Version == "" || info.Etcd != "(unknown)" {
		t.Fatalf("%+v", info)
	}
}
