package cli

import (
	"errors"
	"fmt"
	"testing"
)

func TestIsUsage(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{Usage(errors.New("--store is required")), true},
		{fmt.Errorf("serve: %w", Usage(errors.New("--client-ca needs --tls-cert"))), true},
		{errors.New(`unknown flag: --nope`), false},
		{errors.New("seek /var/lib/etcd/member/snap/db: invalid argument"), false},
		{errors.New("store s3://b: put v2/Full-1: connection refused"), false},
	} {
		if got := IsUsage(c.err); got != c.want {
			t.Errorf("IsUsage(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if Usage(nil) != nil {
		t.Error("Usage(nil) is not nil")
	}
}

func TestLogFlags(t *testing.T) {
	if _, err := (Log{}).Logger(nil); err != nil {
		t.Errorf("zero Log: %v", err)
	}
	if _, err := (Log{Format: "json", Level: "debug"}).Logger(nil); err != nil {
		t.Errorf("json at debug: %v", err)
	}
	if _, err := (Log{Format: "xml"}).Logger(nil); err == nil {
		t.Error("--log-format xml accepted")
	}
	if _, err := (Log{Level: "loud"}).Logger(nil); err == nil {
		t.Error("--log-level loud accepted")
	}
}

// A panic is a bug, reported with its trace, and exits 1: Go's runtime
// would exit 2, the binaries' code for a usage error.
func TestMainTurnsAPanicIntoOne(t *testing.T) {
	if code := Main("test", func() int { panic("boom") }); code != 1 {
		t.Fatalf("a panic exited %d", code)
	}
	if code := Main("test", func() int { return 2 }); code != 2 {
		t.Fatalf("a usage error exited %d", code)
	}
}
