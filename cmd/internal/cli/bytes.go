package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// Bytes is a flag of a size in bytes, written as a number with an
// optional unit: 1024, 500MiB, 20GiB, 1.5TB (KiB, MiB, GiB, TiB are
// powers of 1024; KB, MB, GB, TB of 1000; B or none: bytes).
type Bytes int64

var units = []struct {
	suffix string
	factor float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// Set parses s.
func (b *Bytes) Set(s string) error {
	number, factor := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if n, ok := strings.CutSuffix(number, u.suffix); ok {
			number, factor = strings.TrimSpace(n), u.factor
			break
		}
	}
	v, err := strconv.ParseFloat(number, 64)
	if err != nil || v < 0 || v*factor > 1<<62 {
		return fmt.Errorf("%q: a size such as 1024, 500MiB or 20GiB", s)
	}
	*b = Bytes(v * factor)
	return nil
}

// String prints the size with the largest binary unit that divides it.
func (b *Bytes) String() string {
	for i := 3; i >= 0; i-- {
		u := units[i]
		if *b != 0 && int64(*b)%int64(u.factor) == 0 {
			return fmt.Sprintf("%d%s", int64(*b)/int64(u.factor), u.suffix)
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

// Type names the flag's value in help.
func (b *Bytes) Type() string { return "size" }
