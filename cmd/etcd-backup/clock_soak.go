//go:build etcdkit_soak

package main

import (
	"os"
	"strings"
	"sync"
	"time"
)

// With the etcdkit_soak build tag (internal/soak builds the sidecar so,
// a release never is), the clock is the machine's plus the offset the file
// $SOAK_CLOCK_OFFSET_FILE holds (a Go duration, "-10m"), read again at
// most every 100 ms.
func init() {
	path := os.Getenv("SOAK_CLOCK_OFFSET_FILE")
	if path == "" {
		return
	}
	var (
		mu     sync.Mutex
		offset time.Duration
		read   time.Time
	)
	clock = func() time.Time {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if read.IsZero() || now.Sub(read) > 100*time.Millisecond {
			read = now
			if b, err := os.ReadFile(path); err == nil {
				if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
					offset = d
				}
			}
		}
		return now.Add(offset)
	}
}
