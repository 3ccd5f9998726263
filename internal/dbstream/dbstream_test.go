package dbstream

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// etcd 3.5's maintenance server returns the auth store's error as it is,
// which gRPC sends as code Unknown with its text; 3.6 and later convert it
// to the error etcd's client retries with a new token itself.
func TestUnappliedToken(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"etcd 3.5's bare auth error", status.Error(codes.Unknown, "auth: invalid auth token"), true},
		{"etcd 3.6's converted error", rpctypes.ErrGRPCInvalidAuthToken, false},
		{"permission denied", status.Error(codes.Unknown, "auth: permission denied"), false},
		{"not a gRPC error", errors.New("auth: invalid auth token"), false},
		{"wrapped", fmt.Errorf("stream: %w", status.Error(codes.Unknown, "auth: invalid auth token")), true},
	} {
		if got := unappliedToken(c.err); got != c.want {
			t.Errorf("%s: unappliedToken(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
