package etcdtest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// portHolders names the processes listening on the given loopback ports,
// from /proc: what a test that lost a port reports, so the next failure
// says who took it. "unknown" where /proc does not tell (not Linux).
func portHolders(ports ...string) string {
	inodes := map[string]string{} // socket inode → port
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ... inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				continue
			}
			for _, p := range ports {
				if strconv.FormatUint(port, 10) == p {
					inodes[fields[9]] = p
				}
			}
		}
		_ = f.Close()
	}
	if len(inodes) == 0 {
		return "unknown (no listener found in /proc/net/tcp)"
	}
	var found []string
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		link, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		port, ok := inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")]
		if !ok {
			continue
		}
		pid := strings.Split(fd, "/")[2]
		cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		found = append(found, fmt.Sprintf("port %s: pid %s (%s)", port, pid, strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")))
	}
	if len(found) == 0 {
		return fmt.Sprintf("unknown (listening sockets %v belong to no process this one may read)", inodes)
	}
	return strings.Join(found, "; ")
}
