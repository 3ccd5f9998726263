package cli

import (
	"strings"
	"testing"
	"time"
)

// --lock-for and --lock-mode go into the store URL's query; a store
// without per-object locks, a lock said twice, or a mode without a
// duration is a usage error.
func TestLockFlagsURL(t *testing.T) {
	for _, tc := range []struct {
		lock    LockFlags
		in      string
		want    string // the URL, or a piece of the error
		failure bool
	}{
		{LockFlags{}, "file:///backups", "file:///backups", false},
		{LockFlags{For: 72 * time.Hour}, "s3://b/p?region=eu-west-1", "s3://b/p?lock-for=72h0m0s&region=eu-west-1", false},
		{LockFlags{For: time.Hour, Mode: "compliance"}, "gs://b/p", "gs://b/p?lock-for=1h0m0s&lock-mode=compliance", false},
		{LockFlags{For: time.Hour}, "file:///backups", "a file:// store has no per-object locks", true},
		{LockFlags{For: time.Hour}, "azblob://c/p?lock-for=2h", "names a lock already", true},
		{LockFlags{Mode: "compliance"}, "s3://b/p", "--lock-mode needs --lock-for", true},
		{LockFlags{For: -time.Hour}, "s3://b/p", "a duration above 0", true},
	} {
		got, err := tc.lock.URL(tc.in)
		switch {
		case tc.failure && (err == nil || !IsUsage(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v on %s: %q, %v; want a usage error with %q", tc.lock, tc.in, got, err, tc.want)
		case !tc.failure && (err != nil || got != tc.want):
			t.Errorf("%+v on %s: %q, %v; want %q", tc.lock, tc.in, got, err, tc.want)
		}
	}
}
