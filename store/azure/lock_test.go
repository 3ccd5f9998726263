package azure

import (
	"errors"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/etcdkit/etcdkit/store"
)

// Azure's refusal of a blob an immutability policy or legal hold keeps,
// as Blob Storage answers it (Azurite implements neither, so it is checked
// on the wire's terms only): a delete is ErrLocked, a create ErrExists.
func TestLockRefusals(t *testing.T) {
	loc, err := store.NewLocation("azblob", "backups", "etcd", "container")
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{loc: loc, cfg: Config{Container: "backups"}}
	immutable := &azcore.ResponseError{ErrorCode: "BlobImmutableDueToPolicy", StatusCode: http.StatusConflict}
	denied := &azcore.ResponseError{ErrorCode: "AuthorizationPermissionMismatch", StatusCode: http.StatusForbidden}
	for _, tc := range []struct {
		name string
		op   string
		err  error
		want error
	}{
		{"delete of an immutable blob", "delete", immutable, store.ErrLocked},
		{"create over an immutable blob", "put", immutable, store.ErrExists},
		{"delete without the right", "delete", denied, store.ErrAccessDenied},
	} {
		if got := s.fail(tc.op, "v2/Full-00000000-00000010-1700000000", tc.err); !errors.Is(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
