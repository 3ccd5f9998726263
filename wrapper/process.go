package wrapper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdversion"
)

// ProcessConfigFile is the configuration file a Process writes for etcd,
// in the data dir: the operator's keys with the initial cluster and
// state the start-up decided. etcd ignores it there, and it is written
// anew at every start.
const ProcessConfigFile = "etcdkit-etcd.conf.yaml"

// Process runs an etcd server binary as the wrapper's child: the
// operator's configuration (File, read for the binary's release) with the
// initial cluster and state the start-up decided, its output the
// wrapper's, stopped with SIGTERM as etcd expects. A Process serves one
// Run at a time.
type Process struct {
	// Path is the etcd server binary.
	Path string
	// File is etcd's configuration, read for the binary's release
	// (LoadFile, LoadServedFile).
	File *File
	// StopTimeout bounds a graceful stop (a leader hands its leadership
	// over first) before etcd is killed. Default 1 min.
	StopTimeout time.Duration
	// Stdout and Stderr receive etcd's output. Default the wrapper's.
	Stdout, Stderr io.Writer
	// Logger: nil discards.
	Logger *slog.Logger

	once    sync.Once
	release etcdversion.Version
	err     error
}

// ReleaseOf asks an etcd binary its release (etcd --version), within ctx.
func ReleaseOf(ctx context.Context, path string) (etcdversion.Version, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return etcdversion.Version{}, fmt.Errorf("etcd binary %s: %s --version: %w", path, path, err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "etcd Version:"); ok {
			r, err := etcdversion.Parse(v)
			if err == nil {
				err = etcdversion.CheckSupported(r)
			}
			if err != nil {
				return r, fmt.Errorf("etcd binary %s: %w", path, err)
			}
			return r, nil
		}
	}
	return etcdversion.Version{}, fmt.Errorf("etcd binary %s: %s --version says no \"etcd Version:\" (%q): is it etcd's server?", path, path, bytes.TrimSpace(out))
}

// Release implements Runner: what the binary says, asked once, which must
// be the release the configuration was read for.
func (p *Process) Release(ctx context.Context) (etcdversion.Version, error) {
	p.once.Do(func() {
		p.release, p.err = ReleaseOf(ctx, p.Path)
		if p.err == nil && p.File != nil && p.File.Release.Trim() != p.release.Trim() {
			p.err = fmt.Errorf("etcd binary %s is etcd %s, but its configuration was read for %s", p.Path, p.release, p.File.Release)
		}
	})
	return p.release, p.err
}

// Start implements Runner.
func (p *Process) Start(ctx context.Context, cfg *embed.Config, conn etcdclient.Config) (Etcd, error) {
	release, err := p.Release(ctx)
	if err != nil {
		return nil, err
	}
	if p.File == nil {
		return nil, errors.New("wrapper: a process runner needs etcd's configuration file (Process.File)")
	}
	file, err := p.writeConfig(cfg)
	if err != nil {
		return nil, err
	}
	log := logger(p.Logger)
	cmd := exec.Command(p.Path, "--config-file", file)
	cmd.Stdout, cmd.Stderr = orDefault(p.Stdout, os.Stdout), orDefault(p.Stderr, os.Stderr)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start etcd %s: %w", p.Path, err)
	}
	m := &process{cmd: cmd, exited: make(chan struct{}), done: make(chan struct{}), stopTimeout: p.StopTimeout, log: log}
	if m.stopTimeout <= 0 {
		m.stopTimeout = time.Minute
	}
	go m.wait()
	log.Info("wrapper: etcd started as a process", "etcd", release, "binary", p.Path, "pid", cmd.Process.Pid, "config", file)
	conn = conn.With(urls(cfg.AdvertiseClientUrls)...)
	// etcd listens only once it has opened its data: the client waits.
	conn.AllowUnreachable = true
	conn.Logger = log
	if m.cli, err = etcdclient.New(ctx, conn); err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("etcd %s: %w", p.Path, err)
	}
	if err := m.serving(ctx, release); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// writeConfig writes the operator's keys, with the start-up's initial
// cluster and state, into the data dir for etcd to read.
func (p *Process) writeConfig(cfg *embed.Config) (string, error) {
	keys := maps.Clone(p.File.Keys)
	if cfg.InitialCluster != "" {
		keys["initial-cluster"] = cfg.InitialCluster
	}
	if cfg.ClusterState != "" {
		keys["initial-cluster-state"] = cfg.ClusterState
	}
	b, err := yaml.Marshal(keys)
	if err != nil {
		return "", fmt.Errorf("wrapper: etcd's configuration: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return "", fmt.Errorf("wrapper: %w", err)
	}
	path := filepath.Join(cfg.Dir, ProcessConfigFile)
	tmp, err := os.CreateTemp(cfg.Dir, ProcessConfigFile+".tmp-")
	if err != nil {
		return "", fmt.Errorf("wrapper: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("wrapper: etcd's configuration %s: %w", path, err)
	}
	return path, nil
}

// process is a member Process started.
type process struct {
	cmd         *exec.Cmd
	cli         *clientv3.Client
	id          uint64
	stopTimeout time.Duration
	log         *slog.Logger
	// exited is closed when the process has exited, waitErr then says how.
	exited  chan struct{}
	waitErr error
	// done is closed when it exited without Stop.
	done chan struct{}

	mu       sync.Mutex
	stopping bool
	err      error
}

func (m *process) wait() {
	m.waitErr = m.cmd.Wait()
	close(m.exited)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		return
	}
	// A removed member's etcd exits with 0: still, it stopped by itself.
	m.err = fmt.Errorf("etcd (pid %d) exited by itself (%s): its log above says why (removed from the cluster?)", m.cmd.Process.Pid, exitState(m.waitErr))
	close(m.done)
}

// serving waits until the member answers its clients: etcd serves them
// once it is ready, as the embedded server's ReadyNotify. The release it
// answers as must be the binary's.
func (m *process) serving(ctx context.Context, release etcdversion.Version) error {
	ep := m.cli.Endpoints()[0]
	for {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := m.cli.Status(sctx, ep)
		cancel()
		if err == nil {
			v, perr := etcdversion.Parse(st.Version)
			if perr != nil || v.Trim() != release.Trim() {
				return fmt.Errorf("etcd at %s answers as etcd %q, not the binary's %s: another etcd serves there", ep, st.Version, release)
			}
			m.id = st.Header.GetMemberId()
			return nil
		}
		select {
		case <-m.exited:
			return fmt.Errorf("etcd exited at start (%s): its log above says why", exitState(m.waitErr))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (m *process) ID() uint64               { return m.id }
func (m *process) Client() *clientv3.Client { return m.cli }
func (m *process) Done() <-chan struct{}    { return m.done }

func (m *process) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *process) Learner(ctx context.Context) (bool, error) {
	st, err := m.cli.Status(ctx, m.cli.Endpoints()[0])
	if err != nil {
		return false, err
	}
	return st.IsLearner, nil
}

// Stop sends etcd SIGTERM, its graceful stop, and kills it when it has
// not exited within the stop timeout.
func (m *process) Stop() error {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	if m.cli != nil {
		_ = m.cli.Close()
	}
	select {
	case <-m.exited:
		return nil
	default:
	}
	_ = terminate(m.cmd.Process)
	select {
	case <-m.exited:
		return nil
	case <-time.After(m.stopTimeout):
	}
	m.log.Warn("wrapper: etcd did not stop within the stop timeout; killing it", "timeout", m.stopTimeout, "pid", m.cmd.Process.Pid)
	_ = m.cmd.Process.Kill()
	<-m.exited
	return fmt.Errorf("etcd did not stop within %s and was killed", m.stopTimeout)
}

// exitState says how a process ended.
func exitState(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func orDefault(w, def io.Writer) io.Writer {
	if w == nil {
		return def
	}
	return w
}

// logger is l, or one that discards when l is nil.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
