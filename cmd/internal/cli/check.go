package cli

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Durations are flags that take a duration, and the least each may be.
type Durations []struct {
	Flag  string
	Value time.Duration
	// Zero: 0 is allowed (it means "off" or "none" for this flag).
	Zero bool
}

// Check refuses a negative duration, or a zero one where it means
// nothing, naming the flag and the valid range.
func (ds Durations) Check() error {
	var errs []error
	for _, d := range ds {
		switch {
		case d.Value < 0 && d.Zero:
			errs = append(errs, fmt.Errorf("--%s %s: 0 (off) or more", d.Flag, d.Value))
		case d.Value <= 0 && !d.Zero:
			errs = append(errs, fmt.Errorf("--%s %s: more than 0", d.Flag, d.Value))
		}
	}
	return Usage(errors.Join(errs...))
}

// AtLeast refuses v below least, naming the flag and the range.
func AtLeast(flag string, v, least int64) error {
	if v < least {
		return Usage(fmt.Errorf("--%s %d: %d or more", flag, v, least))
	}
	return nil
}

// URLs refuses values that are not http or https URLs with a host.
func URLs(flag string, values ...string) error {
	for _, v := range values {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Usage(fmt.Errorf("--%s %q: not a URL (write http://host:port or https://host:port)", flag, v))
		}
	}
	return nil
}
