package capture

import (
	"hash/fnv"
	"time"

	"github.com/robfig/cron/v3"
)

// Splayed delays every time of schedule by an offset in [0, splay),
// the same for every call with the same key (a store's URL): each
// prefix of a fleet keeps its own minute across restarts, and the
// fleet's fulls spread over the splay instead of all coming due at once.
func Splayed(schedule cron.Schedule, key string, splay time.Duration) cron.Schedule {
	offset := SplayOffset(key, splay)
	if offset == 0 {
		return schedule
	}
	return splayed{schedule, offset}
}

// SplayOffset is key's offset in [0, splay), in whole seconds (a cron
// schedule's own grain): the same for every call with the same key.
func SplayOffset(key string, splay time.Duration) time.Duration {
	seconds := uint64(splay / time.Second)
	if seconds == 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return time.Duration(h.Sum64()%seconds) * time.Second
}

type splayed struct {
	cron.Schedule
	offset time.Duration
}

// Next is the schedule's next time after t shifted by the offset: the
// first shifted time after t.
func (s splayed) Next(t time.Time) time.Time {
	return s.Schedule.Next(t.Add(-s.offset)).Add(s.offset)
}
