package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
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

// IsUsage reports whether err was marked by Usage. Strict marks cobra's
// own errors about flags, arguments and commands; nothing is told by its
// message, so a failure that says "invalid argument" stays a failure.
func IsUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

// Strict makes every error cobra finds in a command line of root and its
// commands a usage error: flags that do not parse, arguments a command
// does not take, a command that does not exist.
func Strict(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return Usage(err) })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.Args != nil:
			args := c.Args
			c.Args = func(cmd *cobra.Command, a []string) error { return Usage(args(cmd, a)) }
		case c.HasSubCommands() && !c.Runnable():
			// cobra reports an unknown command from the arguments of a
			// command that only groups others.
			c.Args = func(cmd *cobra.Command, a []string) error {
				if len(a) > 0 {
					return Usage(fmt.Errorf("unknown command %q for %q", a[0], cmd.CommandPath()))
				}
				return nil
			}
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// Main runs a binary's run function and returns its exit code. A panic
// is a bug, not a usage error: Go's runtime would exit 2 on it, which the
// binaries give to usage errors, so it is reported and exits 1.
func Main(name string, run func() int) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "%s: internal error (a bug: please report it with this trace): %v\n%s", name, r, debug.Stack())
			code = 1
		}
	}()
	return run()
}
