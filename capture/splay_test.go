package capture_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/etcdkit/etcdkit/capture"
)

// A splayed schedule keeps its period, shifts every time by one offset
// below the splay that a key always gets again, and spreads a fleet's
// prefixes over the splay.
func TestSplayed(t *testing.T) {
	hourly, err := cron.ParseStandard("0 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	minutes := map[int]int{}
	for i := range 200 {
		key := fmt.Sprintf("s3://fleet/cluster-%d", i)
		s := capture.Splayed(hourly, key, 10*time.Minute)
		first := s.Next(at)
		offset := first.Sub(first.Truncate(time.Hour))
		if offset < 0 || offset >= 10*time.Minute || first.Sub(at) > time.Hour || !first.After(at) {
			t.Fatalf("%s: next after %s is %s", key, at, first)
		}
		if o := capture.SplayOffset(key, 10*time.Minute); o != offset {
			t.Fatalf("%s: offset %s, the schedule's %s", key, o, offset)
		}
		if again := capture.Splayed(hourly, key, 10*time.Minute).Next(at); !again.Equal(first) {
			t.Fatalf("%s: %s, then %s", key, first, again)
		}
		if next := s.Next(first); next.Sub(first) != time.Hour {
			t.Fatalf("%s: %s after %s", key, next, first)
		}
		minutes[int(offset/time.Minute)]++
	}
	// 200 prefixes over ten minutes: each minute takes some, none most.
	for m := range 10 {
		if minutes[m] == 0 || minutes[m] > 40 {
			t.Fatalf("fulls per minute of the splay: %v", minutes)
		}
	}
	if s := capture.Splayed(hourly, "k", 0); s != hourly {
		t.Fatal("no splay changed the schedule")
	}
}
