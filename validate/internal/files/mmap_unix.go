//go:build unix

package files

import (
	"fmt"
	"os"
	"syscall"
)

// withMapped maps the file read-only for f. The caller holds the file's
// lock, so nothing shortens it under the mapping.
func withMapped(path string, f func([]byte) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }()
	info, err := file.Stat()
	if err != nil {
		return err
	}
	if info.Size() == 0 {
		return f(nil)
	}
	if int64(int(info.Size())) != info.Size() {
		return fmt.Errorf("%d bytes do not fit in memory", info.Size())
	}
	data, err := syscall.Mmap(int(file.Fd()), 0, int(info.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map: %w", err)
	}
	defer func() { _ = syscall.Munmap(data) }()
	return f(data)
}
