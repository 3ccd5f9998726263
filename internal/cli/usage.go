package cli

import (
	"errors"
	"strings"
)

// usageError is a command line or configuration that cannot run.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// Usage marks err as the caller's mistake rather than a failure: the
// binaries exit 2 on it and point to --help.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// IsUsage reports whether err was marked by Usage or is one of cobra's
// errors about flags, arguments and commands, which it does not type.
func IsUsage(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand", "flag needs an argument", "invalid argument", "unknown command", "accepts ", "requires at least", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
