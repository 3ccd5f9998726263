package soak

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// proc is one run of a binary, its output appended to a log file that
// outlives it: a fault's story is in the logs of every run.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func startProc(name, bin, logFile string, env []string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "\n=== soak: %s starts at %s: %s %q\n", name, time.Now().Format(time.RFC3339Nano), bin, args)
	p := &proc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	// Its own process group: a signal the harness gets is not its own.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		fmt.Fprintf(f, "=== soak: %s exited at %s: %v\n", name, time.Now().Format(time.RFC3339Nano), p.err)
		_ = f.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// kill sends SIGKILL (a stopped process dies too) and waits for the exit.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM and waits up to d for a clean exit, then kills. It
// says whether the process exited by itself with status 0.
func (p *proc) stop(d time.Duration) error {
	if !p.running() {
		return p.err
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		p.kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM", p.name, d)
	}
}

// exitedBadly says whether the process ended without the harness asking.
func (p *proc) exitedBadly() error {
	select {
	case <-p.exited:
		var exit *exec.ExitError
		if errors.As(p.err, &exit) {
			return fmt.Errorf("%s exited by itself: %w", p.name, p.err)
		}
		return fmt.Errorf("%s exited by itself (status 0)", p.name)
	default:
		return nil
	}
}
