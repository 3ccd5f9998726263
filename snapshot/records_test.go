package snapshot

import (
	"os"
	"strings"
	"testing"
)

// FORMAT.md describes every record etcdkit keeps on a store: a new one is
// described there in the same change.
func TestFormatDescribesEveryRecord(t *testing.T) {
	b, err := os.ReadFile("../FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{timelineDir, identityDir, restoreDir, uploaderDir, drillDir, siteKey, mirrorKey, probeDir} {
		if !strings.Contains(string(b), "`"+key) {
			t.Errorf("FORMAT.md does not describe %s", key)
		}
	}
}
