// Package gobuild builds the project's binaries for the tests the way
// tools/image.sh builds them for the images: static (CGO_ENABLED=0) and
// with -trimpath. The tests then run what the images hold, and every
// build of the binaries shares one build cache.
package gobuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Build builds the package pkg (a path as go build takes it, from the
// working directory) into the file out, with go build's flags (-tags …).
func Build(ctx context.Context, out, pkg string, flags ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	args := append(append([]string{"build", "-trimpath"}, flags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}
