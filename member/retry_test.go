package member

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A call that never returns by itself (etcd waiting on a membership change
// raft dropped) is cut at AttemptTimeout and tried again; one that then
// answers ends the retries.
func TestRetryBoundsEachAttempt(t *testing.T) {
	o := RetryOptions{Deadline: 5 * time.Second, Backoff: time.Millisecond, AttemptTimeout: 50 * time.Millisecond}
	calls := 0
	err := retry(context.Background(), o, "hang twice", func(error) bool { return false }, func(ctx context.Context) error {
		calls++
		if calls < 3 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("retry: %v after %d calls, want success at the third", err, calls)
	}

	o.Deadline = 200 * time.Millisecond
	err = retry(context.Background(), o, "hang always", func(error) bool { return false }, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call that always hangs: %v", err)
	}

	// The caller's own cancellation is not retried.
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = retry(ctx, o, "cancelled", func(error) bool { return false }, func(ctx context.Context) error {
		calls++
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("cancelled by the caller: %v after %d calls", err, calls)
	}
}
