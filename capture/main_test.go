package capture_test

import (
	"os"
	"testing"

	"github.com/etcdkit/etcdkit/internal/emulator"
)

// The tests share one emulator of each kind, each on a bucket of its own.
func TestMain(m *testing.M) { os.Exit(emulator.Run(m)) }
