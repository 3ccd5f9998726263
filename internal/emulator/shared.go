package emulator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// shared holds the emulators a test binary's tests share: one of each
// kind, started by the first test that asks, stopped by Run.
var shared = struct {
	sync.Mutex
	main    bool
	servers map[Kind]*Server
	errs    map[Kind]error
}{servers: map[Kind]*Server{}, errs: map[Kind]error{}}

// Run runs a test binary's tests, stops the emulators they shared and
// returns the exit code: a package whose tests call Shared has
// TestMain call os.Exit(emulator.Run(m)).
func Run(m *testing.M) int {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	for _, s := range shared.servers {
		s.Stop()
	}
	shared.Unlock()
	return code
}

// Shared returns this test binary's emulator of kind, starting it on the
// first call: a test that only stores and reads objects needs no server of
// its own, only a bucket of its own (Bucket). A test that stops, halts or
// restarts its emulator takes its own with Require. Without Run the
// emulator is the test's own, as with Require.
func Shared(t testing.TB, kind Kind) *Server {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		s, err := Start(context.Background(), kind, Options{})
		return required(t, s, err)
	}
	if s := shared.servers[kind]; s != nil {
		return s
	}
	if err := shared.errs[kind]; err != nil {
		// A start that failed fails every test that asks, not only the
		// first.
		needed(t, err)
	}
	s, err := Start(context.Background(), kind, Options{})
	if err != nil {
		shared.errs[kind] = err
		needed(t, err)
	}
	shared.servers[kind] = s
	return s
}

var buckets atomic.Int64

// Bucket is a bucket or container name no other test of the binary uses,
// valid on S3, GCS and Azure (lowercase letters, digits and single
// hyphens, 3 to 63 characters), named after the test for whoever reads an
// emulator's data.
func Bucket(t testing.TB) string {
	var b strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(t.Name()) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			hyphen = false
		} else if !hyphen && b.Len() > 0 {
			b.WriteByte('-')
			hyphen = true
		}
	}
	name := strings.TrimSuffix(b.String(), "-")
	suffix := fmt.Sprintf("-%d", buckets.Add(1))
	if len(name)+len(suffix) > 62 {
		name = strings.TrimSuffix(name[:62-len(suffix)], "-")
	}
	if name == "" || name[0] < 'a' {
		name = "t" + name
	}
	return name + suffix
}
