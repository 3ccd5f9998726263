//go:build !unix

package files

import "os"

// withMapped reads the whole file where mapping is not available.
func withMapped(path string, f func([]byte) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return f(data)
}
