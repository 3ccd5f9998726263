package all_test

import (
	"testing"

	"github.com/etcdkit/etcdkit/store"
	_ "github.com/etcdkit/etcdkit/store/all"
)

// Importing all registers every backend's scheme.
func TestEveryBackendRegistered(t *testing.T) {
	for _, u := range []string{"file:///backups", "mem://", "s3://bucket/p", "gs://bucket/p", "azblob://container/p", "swift://container/p"} {
		if err := store.CheckURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
