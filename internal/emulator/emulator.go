package emulator

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/freeport"
)

// Kind names an emulator.
type Kind string

const (
	S3    Kind = "s3"
	GCS   Kind = "gcs"
	Azure Kind = "azure"
	// Kube is kube-apiserver: started by StartKube, over an etcd of the
	// test's.
	Kube Kind = "kube-apiserver"
	// Helm is no server: the pinned helm program (RequireProgram), which
	// lints and renders the chart.
	Helm Kind = "helm"
)

// RequireProgram is the path of a program tools/install-emulators.sh
// installs that the test runs itself (helm): skipped when it is not
// installed, failed under ETCDKIT_REQUIRE_EMULATORS=1.
func RequireProgram(t testing.TB, kind Kind) string {
	t.Helper()
	p, err := program(kind)
	if err != nil {
		needed(t, err)
	}
	return p
}

// Azurite's well-known development account, the one its documentation
// publishes; it is not a secret.
const (
	AzureAccount = "devstoreaccount1"
	AzureKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// ErrNotInstalled is returned by Start when the emulator's program is not
// where tools/install-emulators.sh puts it.
var ErrNotInstalled = errors.New("emulator not installed (run tools/install-emulators.sh, or the test command tools/test.sh)")

// Server is a running emulator.
type Server struct {
	Kind Kind
	// Endpoint is the base URL clients use: http://127.0.0.1:<port> for S3
	// and GCS, http://127.0.0.1:<port>/devstoreaccount1 for Azure.
	Endpoint string
	// Port the server listens on; Restart reuses it.
	Port int
	// AccessKey and SecretKey are the S3 root credentials.
	AccessKey, SecretKey string
	// Account and Key are the Azure shared key credentials.
	Account, Key string
	// Kube is what a client of the API server needs.
	Kube *KubeAPI
	// Etcd is the member an older etcd's server runs.
	Etcd *Etcd
	// KineServer is kine's, for Kine.
	KineServer *KineServer

	prog   string
	dir    string
	ownDir bool
	// adminPort is the S3 emulator's admin API's, with Options.S3Users.
	adminPort int
	// swiftPorts are Swift's account, container, object and memcached
	// ports.
	swiftPorts [4]int
	// azureCert and azureKey: Options'.
	azureCert, azureKey string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	logs   *tail
}

// Options for Start.
type Options struct {
	// Dir holds the emulator's data; "" means a new temporary directory,
	// removed by Stop.
	Dir string
	// Port to listen on; 0 means a free one.
	Port int
	// S3Users runs the S3 emulator with its IAM, for a test that creates
	// and deletes users beside the root (CreateS3User, DeleteS3User).
	S3Users bool
	// AzureCert and AzureKey make Azurite serve HTTPS with this
	// certificate and take OAuth bearer tokens beside shared keys
	// (--oauth basic: their claims are checked, not their signature).
	AzureCert, AzureKey string
}

// ToolsDir returns where the emulators are installed: $ETCDKIT_TOOLS_DIR,
// or the tools directory of the module the working directory is in.
func ToolsDir() (string, error) {
	if d := os.Getenv("ETCDKIT_TOOLS_DIR"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module github.com/etcdkit/etcdkit\n") {
			return filepath.Join(dir, "tools"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("emulator: not inside the etcdkit module; set ETCDKIT_TOOLS_DIR")
		}
		dir = parent
	}
}

func program(kind Kind) (string, error) {
	tools, err := ToolsDir()
	if err != nil {
		return "", err
	}
	var p string
	switch kind {
	case S3:
		p = filepath.Join(tools, "bin", "versitygw")
	case GCS:
		p = filepath.Join(tools, "bin", "fake-gcs-server")
	case Azure:
		p = filepath.Join(tools, "azurite", "node_modules", ".bin", "azurite-blob")
	case Kube:
		p = filepath.Join(tools, "bin", "kube-apiserver")
	case Etcd35, Etcd36, Etcd37, Kine, Helm:
		p = filepath.Join(tools, "bin", string(kind))
	case Swift:
		return swiftProgram(tools)
	case Postgres:
		return postgresProgram(tools)
	default:
		return "", fmt.Errorf("emulator: unknown kind %q", kind)
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s: %w: %s is missing", kind, ErrNotInstalled, p)
	}
	return p, nil
}

// Start starts an emulator and waits until it answers.
func Start(ctx context.Context, kind Kind, opts Options) (*Server, error) {
	switch kind {
	case Kube:
		return nil, errors.New("emulator: kube-apiserver needs an etcd: StartKube")
	case Etcd35, Etcd36, Etcd37:
		return nil, errors.New("emulator: an etcd server starts with StartEtcd")
	case Kine:
		return nil, errors.New("emulator: kine starts with StartKine")
	}
	s, err := prepare(kind, opts)
	if err != nil {
		return nil, err
	}
	if err := s.run(ctx, opts); err != nil {
		return nil, err
	}
	return s, nil
}

// prepare finds the program and the data directory.
func prepare(kind Kind, opts Options) (*Server, error) {
	prog, err := program(kind)
	if err != nil {
		return nil, err
	}
	s := &Server{Kind: kind, Port: opts.Port, dir: opts.Dir, prog: prog, azureCert: opts.AzureCert, azureKey: opts.AzureKey}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "etcdkit-"+string(kind)+"-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	}
	if opts.S3Users && kind == S3 {
		if s.adminPort, err = freePort(); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(s.dir+"-iam", 0o700); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// run starts the prepared server on its port or a free one.
func (s *Server) run(ctx context.Context, opts Options) error {
	var err error
	// A port picked free may be taken before the emulator binds it; a new
	// one fixes that.
	for attempt := 0; ; attempt++ {
		if opts.Port == 0 {
			if s.Port, err = freePort(); err != nil {
				break
			}
		}
		err = s.start(ctx)
		if err == nil || opts.Port != 0 || attempt == 2 {
			break
		}
	}
	if err != nil && s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
	return err
}

func (s *Server) args() ([]string, error) {
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
	switch s.Kind {
	case Swift:
		return s.swiftArgs()
	case S3:
		s.AccessKey, s.SecretKey = "etcdkit-test-access", "etcdkit-test-secret"
		s.Endpoint = "http://" + addr
		args := []string{"--access", s.AccessKey, "--secret", s.SecretKey, "--port", addr, "--quiet"}
		if s.adminPort != 0 {
			// Beside the data: a directory inside it would be a bucket.
			args = append(args, "--admin-port", fmt.Sprintf("127.0.0.1:%d", s.adminPort), "--iam-dir", s.dir+"-iam")
		}
		// Versions beside the data, as the IAM directory: buckets that
		// enable versioning (Object Lock does) keep them there.
		if err := os.MkdirAll(s.dir+"-versions", 0o700); err != nil {
			return nil, err
		}
		return append(args, "posix", "--versioning-dir", s.dir+"-versions", s.dir), nil
	case GCS:
		s.Endpoint = "http://" + addr
		return []string{"-scheme", "http", "-host", "127.0.0.1", "-port", fmt.Sprint(s.Port),
			"-backend", "memory", "-public-host", addr, "-log-level", "error"}, nil
	case Kube:
		return s.Kube.args(s.Port), nil
	case Etcd35, Etcd36, Etcd37:
		return s.Etcd.args(s.Port), nil
	case Kine:
		return s.KineServer.args(s.Port), nil
	case Postgres:
		return s.postgresArgs(), nil
	default: // Azure
		s.Account, s.Key = AzureAccount, AzureKey
		s.Endpoint = "http://" + addr + "/" + AzureAccount
		args := []string{"--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(s.Port), "--location", s.dir,
			"--silent", "--disableTelemetry", "--skipApiVersionCheck"}
		if s.azureCert != "" {
			s.Endpoint = "https://" + addr + "/" + AzureAccount
			args = append(args, "--cert", s.azureCert, "--key", s.azureKey, "--oauth", "basic")
		}
		return args, nil
	}
}

func (s *Server) start(ctx context.Context) error {
	args, err := s.args()
	if err != nil {
		return err
	}
	cmd := exec.Command(s.prog, args...)
	logs := &tail{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("emulator %s: start %s: %w", s.Kind, s.prog, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.logs, s.exited = cmd, logs, exited
	s.mu.Unlock()

	wait := 60 * time.Second
	if s.Kind == Kube {
		// Its post-start work takes seconds alone, more beside a busy test run.
		wait = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		if s.answers(ctx) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("emulator %s exited at start (%w): %s", s.Kind, waitErr, logs)
		case <-ctx.Done():
			// Halted, not stopped: its directory stays for the next
			// attempt on another port.
			s.halt()
			return fmt.Errorf("emulator %s: no answer on port %d: %w: %s", s.Kind, s.Port, ctx.Err(), logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answers says whether the server is up: any answer for a store
// emulator, the API server's readiness, an etcd's health.
func (s *Server) answers(ctx context.Context) bool {
	switch s.Kind {
	case Kube:
		return s.Kube.ready()
	case Etcd35, Etcd36, Etcd37:
		return s.Etcd.healthy()
	case Swift:
		return s.swiftReady()
	case Kine:
		return s.KineServer.ready(s.Logs())
	case Postgres:
		return s.postgresReady(ctx)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	scheme := "http"
	if s.azureCert != "" {
		// Any answer will do; the test's client checks the certificate.
		scheme = "https"
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a readiness probe on loopback
	}
	resp, err := client.Get(fmt.Sprintf("%s://127.0.0.1:%d/", scheme, s.Port))
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return true
}

// Stop kills the emulator and waits until it has exited. The data of an
// emulator whose directory Start made is removed.
func (s *Server) Stop() {
	s.halt()
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
		_ = os.RemoveAll(s.dir + "-iam")
		_ = os.RemoveAll(s.dir + "-versions")
	}
}

// CreateS3User adds a user with the admin role and these keys to an S3
// emulator started with Options.S3Users.
func (s *Server) CreateS3User(ctx context.Context, access, secret string) error {
	return s.s3Admin(ctx, "create-user", "--access", access, "--secret", secret, "--role", "admin")
}

// DeleteS3User removes the user of access key access: its keys are
// refused from then on.
func (s *Server) DeleteS3User(ctx context.Context, access string) error {
	return s.s3Admin(ctx, "delete-user", "--access", access)
}

func (s *Server) s3Admin(ctx context.Context, args ...string) error {
	if s.Kind != S3 || s.adminPort == 0 {
		return errors.New("emulator: users need an S3 emulator started with S3Users")
	}
	args = append([]string{"admin", "--access", s.AccessKey, "--secret", s.SecretKey,
		"--endpoint-url", fmt.Sprintf("http://127.0.0.1:%d", s.adminPort)}, args...)
	out, err := exec.CommandContext(ctx, s.prog, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("emulator s3: versitygw %s: %w: %s", strings.Join(args[7:], " "), err, out)
	}
	return nil
}

// halt kills the process group so that Node's children go too.
func (s *Server) halt() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	killGroup(cmd.Process.Pid)
	<-exited
	if s.Kind == Swift {
		s.killSwift()
	}
}

// Halt kills the emulator and keeps its data: the store is gone until
// Restart, as when a cloud endpoint is unreachable.
func (s *Server) Halt() { s.halt() }

// Restart stops the emulator and starts it again on the same port and data
// directory; what a memory backend held is gone.
func (s *Server) Restart(ctx context.Context) error {
	s.halt()
	return s.start(ctx)
}

// Logs returns the last lines the emulator printed.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		return ""
	}
	return s.logs.String()
}

// Require starts an emulator for a test and stops it when the test ends.
// When the emulator is not installed the test fails if
// ETCDKIT_REQUIRE_EMULATORS=1 (the project's test command and CI set it),
// and is skipped with the command that installs it otherwise.
func Require(t testing.TB, kind Kind) *Server {
	t.Helper()
	return RequireWith(t, kind, Options{})
}

// RequireWith is Require with options.
func RequireWith(t testing.TB, kind Kind, opts Options) *Server {
	t.Helper()
	s, err := Start(context.Background(), kind, opts)
	return required(t, s, err)
}

func required(t testing.TB, s *Server, err error) *Server {
	t.Helper()
	if err != nil {
		needed(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// needed ends a test whose emulator did not start: skipped with the
// command that installs it when it is not installed (a failure when
// ETCDKIT_REQUIRE_EMULATORS=1), failed otherwise.
func needed(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) {
		if os.Getenv("ETCDKIT_REQUIRE_EMULATORS") == "1" {
			t.Fatalf("%v (ETCDKIT_REQUIRE_EMULATORS=1)", err)
		}
		t.Skipf("%v; skipping", err)
	}
	t.Fatal(err)
}

func freePort() (int, error) {
	port, err := freeport.Pick()
	if err != nil {
		return 0, fmt.Errorf("emulator: %w", err)
	}
	return port, nil
}

// tail keeps the last bytes written to it, for error messages.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(string(t.buf)))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines, " | ")
}
