package datadir

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleaseMapped drops this process's resident pages of the files in dir
// from its read-only mappings (madvise MADV_DONTNEED): bbolt maps a
// database read-only and whole, so after a pass over it every page it
// touched counts in the process's resident set. Nothing is lost: a
// read-only shared mapping holds no changes of its own, and the pages stay
// in the page cache.
//
// The caller must hold off every remap of those files for the call (for
// an etcd backend: hold its batch transaction's lock, under which alone
// bbolt grows and remaps). Between reading /proc/self/maps and the madvise
// a remapped range may be anything else, Go's heap among it, which
// DONTNEED would zero: a CPU-loaded suite saw "found pointer to free
// object" when a ticker released beside a compaction. (MADV_PAGEOUT, which
// only reclaims, was tried in its place: it evicts the page cache too, and
// a compaction on a loaded machine then crawled from disk past its
// two-minute deadline.)
func ReleaseMapped(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || filepath.Dir(fields[5]) != dir || !strings.HasPrefix(fields[1], "r-") {
			continue
		}
		start, end, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		lo, err1 := strconv.ParseUint(start, 16, 64)
		hi, err2 := strconv.ParseUint(end, 16, 64)
		if err1 != nil || err2 != nil || hi <= lo {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), unix.MADV_DONTNEED); errno != 0 {
			return errno
		}
	}
	return sc.Err()
}

// ResidentFile is this process's file-backed resident set in bytes
// (RssFile): what ReleaseMapped lowers.
func ResidentFile() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err != nil {
				return 0, fmt.Errorf("/proc/self/status: RssFile: %w", err)
			}
			return kib << 10, nil
		}
	}
	return 0, errors.New("/proc/self/status: no RssFile")
}
