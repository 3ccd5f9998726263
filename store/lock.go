package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Lock is the retention a store gives each object it writes, on a bucket
// that allows per-object locks but has no default policy (or a shorter
// one): a store URL's ?lock-for=72h&lock-mode=governance|compliance. The
// zero Lock sets none, and the bucket's own policy, if any, still holds.
type Lock struct {
	// For is how long from its upload an object is kept; zero: no lock.
	For time.Duration
	// Compliance: no one may shorten or lift the lock until it ends
	// (S3 compliance, GCS and Azure "Locked"). false: governance, which a
	// user with the provider's bypass right may still lift (S3
	// governance, GCS and Azure "Unlocked").
	Compliance bool
}

// ParseLock reads lock-for and lock-mode from a store URL's query.
func ParseLock(loc Location, q *Query) (Lock, error) {
	var l Lock
	if v := q.Get("lock-for"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Lock{}, BadURL(fmt.Errorf("store %s: lock-for %q: a duration above 0, such as 72h", loc, v))
		}
		l.For = d
	}
	switch m := strings.ToLower(q.Get("lock-mode")); m {
	case "", "governance":
	case "compliance":
		l.Compliance = true
	default:
		return Lock{}, BadURL(fmt.Errorf("store %s: lock-mode %q: governance or compliance", loc, m))
	}
	return l, nil
}

// Until is when the lock of an object written at now ends; zero for the
// zero Lock.
func (l Lock) Until(now time.Time) time.Time {
	if l.For <= 0 {
		return time.Time{}
	}
	return now.Add(l.For)
}

// LockTeller is a store that can say how long a write-once lock keeps an
// object, a per-object retention or a bucket's policy.
type LockTeller interface {
	// LockedUntil is when the lock of the object under key ends; zero
	// when none keeps it or the store does not say.
	LockedUntil(ctx context.Context, key string) (time.Time, error)
}

// LockedUntil says when the lock of the object under key ends, for a
// store (or a view over one) that can tell; zero for others.
func LockedUntil(ctx context.Context, st Store, key string) (time.Time, error) {
	if err := CheckKey(key); err != nil {
		return time.Time{}, err
	}
	if t, prefix, ok := as[LockTeller](st); ok {
		return t.LockedUntil(ctx, JoinKey(prefix, key))
	}
	return time.Time{}, nil
}
