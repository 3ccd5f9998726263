package swift_test

import (
	"os"
	"testing"

	"github.com/etcdkit/etcdkit/internal/emulator"
)

// The tests share one emulator, each on a container of its own.
func TestMain(m *testing.M) { os.Exit(emulator.Run(m)) }
