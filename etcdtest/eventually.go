package etcdtest

import (
	"testing"
	"time"
)

// Eventually polls ok every 20 ms until it holds, and fails the test
// naming what when d passes first. Callers that want the last state in
// the failure keep it in the closure and log it before returning false.
func Eventually(t testing.TB, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
