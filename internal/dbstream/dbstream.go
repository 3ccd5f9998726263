package dbstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// attempts is how many times a stream refused for its token is opened.
const attempts = 5

// Open streams the database of the member cli reaches, followed by its
// SHA-256. It reads the first message before it returns, so that a
// refusal is an error here rather than in the middle of a copy.
//
// etcd's client authenticates afresh for every stream, and with several
// endpoints the member the stream reaches may not have applied that
// Authenticate yet: etcd 3.6 and later answer with the error the client
// retries itself, etcd 3.5 with a bare "auth: invalid auth token" that it
// does not. Open asks again, with a new token, a few times.
func Open(ctx context.Context, cli *clientv3.Client) (io.ReadCloser, error) {
	for attempt := 1; ; attempt++ {
		resp, err := cli.SnapshotWithVersion(ctx)
		if err == nil {
			return resp.Snapshot, nil
		}
		if !unappliedToken(err) || attempt == attempts {
			return nil, fmt.Errorf("etcd snapshot: %w", err)
		}
		wait := time.NewTimer(time.Duration(attempt) * 100 * time.Millisecond)
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, fmt.Errorf("etcd snapshot: %w", err)
		case <-wait.C:
		}
	}
}

// unappliedToken tells etcd 3.5's answer to a token its member does not
// know, which etcd's client leaves to its caller: the text of the server's
// auth.ErrInvalidAuthToken, not converted to a gRPC error.
func unappliedToken(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return false
	}
	st := se.GRPCStatus()
	return st.Code() == codes.Unknown && st.Message() == "auth: invalid auth token"
}
