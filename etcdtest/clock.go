package etcdtest

import (
	"sync"
	"time"
)

// Clock runs at real speed from a time the test sets, and jumps when the
// test sets another: a schedule's next hour comes in a second, and a
// restart can come hours later, without sleeping. Its zero value reads the
// real time until Set.
type Clock struct {
	mu    sync.Mutex
	base  time.Time
	since time.Time
}

// Set makes the clock read t now.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.since = t, time.Now()
}

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		return time.Now()
	}
	return c.base.Add(time.Since(c.since))
}
