package fleet_test

import (
	"os"
	"testing"

	"github.com/etcdkit/etcdkit/internal/emulator"
)

func TestMain(m *testing.M) { os.Exit(emulator.Run(m)) }
