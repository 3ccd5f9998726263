package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// memory is a process's resident memory: Peak is the kernel's high-water
// mark of the whole resident set (VmHWM); Anon and File are the highest
// anonymous and file-backed resident sizes seen while sampling. The file
// part (a mapped bbolt database) is page cache the kernel takes back
// under pressure; the anonymous part is what the process really needs.
type memory struct {
	Peak, Anon, File int64
}

// statusFields reads fields (in bytes) of a /proc/<pid>/status file.
func statusFields(path string, names ...string) []int64 {
	out := make([]int64, len(names))
	data, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(data)) {
		for i, name := range names {
			if rest, ok := strings.CutPrefix(line, name+":"); ok {
				var kib int64
				_, _ = fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib)
				out[i] = kib << 10
			}
		}
	}
	return out
}

// sample adds one reading of a status file to m.
func (m *memory) sample(status string) {
	f := statusFields(status, "VmHWM", "RssAnon", "RssFile", "RssShmem")
	m.Peak, m.Anon, m.File = max(m.Peak, f[0]), max(m.Anon, f[1]), max(m.File, f[2]+f[3])
}

func (m memory) String() string {
	return fmt.Sprintf("peak RSS %d MiB (anonymous %d MiB, file-backed %d MiB)", m.Peak>>20, m.Anon>>20, m.File>>20)
}

// watchSelf samples this process's memory until stop is called.
func watchSelf() (stop func() memory) {
	var m memory
	done, result := make(chan struct{}), make(chan memory)
	go func() {
		for {
			m.sample("/proc/self/status")
			select {
			case <-done:
				result <- m
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() memory { close(done); return <-result }
}

// peakRSS is this process's peak resident set (VmHWM). The rusage a parent
// gets counts the parent's own memory from before the child's exec.
func peakRSS() int64 {
	return statusFields("/proc/self/status", "VmHWM")[0]
}

// runWatchingMemory runs a command that is not ours and samples its memory
// until it exits, once it runs its own program.
func runWatchingMemory(cmd *exec.Cmd) ([]byte, memory, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	var m memory
	if err := cmd.Start(); err != nil {
		return nil, m, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	proc := fmt.Sprintf("/proc/%d/", cmd.Process.Pid)
	for {
		if exe, err := os.Readlink(proc + "exe"); err == nil && exe == cmd.Path {
			m.sample(proc + "status")
		}
		select {
		case err := <-done:
			return []byte(out.String()), m, err
		case <-time.After(10 * time.Millisecond):
		}
	}
}
