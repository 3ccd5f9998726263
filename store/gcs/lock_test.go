package gcs

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/api/googleapi"

	"github.com/etcdkit/etcdkit/store"
)

// GCS's refusals of a locked object, as its JSON API answers them (the
// emulator keeps no retention policy, so they are checked on the wire's
// terms only): a delete is ErrLocked, a create ErrExists, and other 403s
// stay access denied.
func TestLockRefusals(t *testing.T) {
	loc, err := store.NewLocation("gs", "backups", "etcd", "bucket")
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{loc: loc, cfg: Config{Bucket: "backups"}}
	refusal := func(msg string) error {
		return fmt.Errorf("googleapi: %w", &googleapi.Error{Code: http.StatusForbidden, Message: msg,
			Errors: []googleapi.ErrorItem{{Reason: "forbidden", Message: msg}}})
	}
	policy := refusal("Object 'backups/etcd/v2/Full-00000000-00000010-1700000000' is subject to bucket's retention policy and cannot be deleted, overwritten or archived until 2031-09-20T12:18:15.93713-07:00")
	hold := refusal("Object 'backups/etcd/v2/Full-00000000-00000010-1700000000' is under active Temporary hold and cannot be deleted, overwritten or archived until hold is removed.")
	denied := refusal("etcd-backup@p.iam.gserviceaccount.com does not have storage.objects.delete access to the Google Cloud Storage object.")
	for _, tc := range []struct {
		name string
		op   string
		err  error
		want error
	}{
		{"delete under a retention policy", "delete", policy, store.ErrLocked},
		{"delete under a hold", "delete", hold, store.ErrLocked},
		{"create over a locked object", "put", policy, store.ErrExists},
		{"delete without the right", "delete", denied, store.ErrAccessDenied},
	} {
		if got := s.fail(tc.op, "v2/Full-00000000-00000010-1700000000", tc.err); !errors.Is(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
