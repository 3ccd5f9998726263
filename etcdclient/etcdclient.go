package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	"github.com/etcdkit/etcdkit/tlsfiles"
)

var (
	// ErrUnreachable is New's error when no endpoint accepts a
	// connection: a caller that may start before etcd (a sidecar, a
	// member asking its peers) waits and tries again; an operator's
	// command reports it.
	ErrUnreachable = errors.New("no etcd member answers")
	// ErrSettings marks New's errors that a setting fixes (a TLS file,
	// the scheme, the user, its password or role): waiting does not help.
	ErrSettings = errors.New("etcd client settings")
)

// rootRole is etcd's role of the calls it allows administrators only.
const rootRole = "root"

// settingError is an error of the settings.
type settingError struct{ error }

func (e settingError) Unwrap() error        { return e.error }
func (e settingError) Is(target error) bool { return target == ErrSettings }

// Config says how to reach etcd. The zero value of every field but
// Endpoints is a plain connection with a 5 s dial timeout and a 30 s
// bound on each call that has no deadline of its own.
type Config struct {
	// Endpoints are client URLs, all http:// or all https://.
	Endpoints []string
	// TLS is used for https endpoints: the CA bundle that signed the
	// members' certificates (default: the system's roots), the client
	// certificate and key when members require one, a server name.
	TLS tlsfiles.Files
	// User logs in with etcd's authentication, with the password in
	// PasswordFile (trailing newlines dropped). A password is never a
	// command-line value: ps shows those. With neither, a member that
	// requires client certificates takes the certificate's common name
	// as the user.
	User, PasswordFile string
	// DialTimeout bounds the first connection to each endpoint and the
	// login. Default 5 s.
	DialTimeout time.Duration
	// RequestTimeout bounds each call made without a deadline of its own
	// (a stream, such as a watch or a snapshot, is not bounded). Default
	// 30 s.
	RequestTimeout time.Duration
	// RequireRoot: the caller makes calls etcd allows the root role only
	// (snapshots, hashes, defragmentation, membership changes). When
	// authentication is on, New checks that the user has the role, so a
	// missing grant fails now rather than at the first snapshot.
	RequireRoot bool
	// AllowUnreachable: when no endpoint answers, New returns a client
	// that connects, and logs in, once one does, instead of
	// ErrUnreachable: for a process that may start before etcd, such as
	// a sidecar whose API prepares etcd's data dir. What New could not
	// check then (TLS, the login, the root role) shows in the first calls'
	// errors.
	AllowUnreachable bool
	// Logger: nil discards.
	Logger *slog.Logger
}

// name is how errors name the cluster.
func (c Config) name() string { return "etcd " + strings.Join(c.Endpoints, ",") }

// wrong marks an error as one of the settings.
func (c Config) wrong(err error) error { return settingError{fmt.Errorf("%s: %w", c.name(), err)} }

// With returns the configuration with other endpoints.
func (c Config) With(endpoints ...string) Config {
	c.Endpoints = slices.Clone(endpoints)
	return c
}

func (c Config) withDefaults() Config {
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// New checks the configuration against the endpoints and returns a client
// of them. It fails with ErrUnreachable when no endpoint accepts a
// connection, and with an error naming what to fix when TLS or
// authentication is wrong.
func New(ctx context.Context, c Config) (*clientv3.Client, error) {
	c = c.withDefaults()
	secure, err := scheme(c.Endpoints)
	if err != nil {
		return nil, c.wrong(err)
	}
	var files *tlsfiles.Client
	if secure {
		if files, err = c.TLS.NewClient(c.Logger); err != nil {
			return nil, c.wrong(err)
		}
	} else if !c.TLS.IsZero() {
		c.Logger.Warn("etcd: TLS files are given but the endpoints are http://, so they are not used; give https:// URLs to use TLS", "endpoints", c.Endpoints)
	}
	password, err := c.password()
	if err != nil {
		return nil, c.wrong(err)
	}
	err = probe(ctx, c, files)
	later := errors.Is(err, ErrUnreachable) && c.AllowUnreachable
	switch {
	case later:
		c.Logger.Warn("etcd: no member answers yet; the client connects, and logs in, when one does", "endpoints", c.Endpoints, "error", err)
	case errors.Is(err, ErrUnreachable):
		return nil, fmt.Errorf("%s: %w", c.name(), err)
	case err != nil:
		return nil, c.wrong(err)
	}
	cfg := clientv3.Config{
		Endpoints:            c.Endpoints,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(bound(c.RequestTimeout)),
			// gRPC's own backoff grows to two minutes: a member back from
			// an outage, or started after its sidecar, would wait that long
			// for its clients.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
				MinConnectTimeout: c.DialTimeout,
			}),
			experimental.WithBufferPool(&buffers{}),
			// gRPC's window on loopback stays near 64 KiB, some 50 events
			// of 1 KiB: a reader stalled for milliseconds (its cores lent to
			// etcd, a GC) blocks the member's send, etcd moves the watch to
			// its unsynced set, and from there it catches up at most 1000
			// revisions per 100 ms: above 10,000 writes/s, never. A window
			// of seconds of events keeps the watch synced through a stall.
			grpc.WithInitialWindowSize(8 << 20),
			grpc.WithInitialConnWindowSize(16 << 20),
		},
	}
	if files != nil {
		// Appended after the client's own credentials, so these win.
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithTransportCredentials(&credentials{files: files}))
	}
	if c.User != "" {
		// clientv3 logs in inside New, once: a member that is not up yet
		// fails New, and a cluster whose authentication is turned on
		// later is never logged into (the client goes on without a token,
		// or as its certificate's common name). Made with a token etcd
		// refuses instead, the client logs in whenever etcd refuses it,
		// with the credentials set below.
		cfg.Token = "etcdkit-not-logged-in"
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.name(), err)
	}
	if c.User != "" {
		cli.Token, cli.Username, cli.Password = "", c.User, password
		if later {
			go logIn(cli, c)
		} else if err := logInNow(ctx, cli, c); err != nil {
			_ = cli.Close()
			return nil, err
		}
	}
	if c.RequireRoot && !later {
		err := requireRoot(ctx, cli, c, files)
		if errors.Is(err, errNoAnswer) && c.AllowUnreachable {
			// A member still replaying its log accepts connections and
			// answers nothing: as for one that is down, the client goes on
			// and its calls fail until the member answers.
			c.Logger.Warn("etcd: a member accepts connections but answers nothing yet (one still starting does so); the client goes on", "endpoints", c.Endpoints, "error", err)
			return cli, nil
		}
		if err != nil {
			_ = cli.Close()
			return nil, err
		}
	}
	return cli, nil
}

// scheme checks the endpoints and says whether they are https.
func scheme(endpoints []string) (bool, error) {
	if len(endpoints) == 0 {
		return false, errors.New("no endpoints: give the members' client URLs")
	}
	var secure, plain bool
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return false, fmt.Errorf("endpoint %q: give a client URL, http://host:port or https://host:port", ep)
		}
		secure = secure || u.Scheme == "https"
		plain = plain || u.Scheme == "http"
	}
	if secure && plain {
		return false, errors.New("the endpoints mix http:// and https://: a cluster serves clients one way; give one scheme")
	}
	return secure, nil
}

// password reads the password file.
func (c Config) password() (string, error) {
	switch {
	case c.User == "" && c.PasswordFile != "":
		return "", fmt.Errorf("a password file (%s) without a user: give the user too", c.PasswordFile)
	case strings.Contains(c.User, ":"):
		return "", fmt.Errorf("user %q: give the name alone and put the password in a file (the password file): a command line shows in ps", strings.SplitN(c.User, ":", 2)[0]+":…")
	case c.User == "":
		return "", nil
	case c.PasswordFile == "":
		return "", fmt.Errorf("etcd user %q has no password file: give the file that holds the password", c.User)
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("etcd user %q: password file: %w", c.User, err)
	}
	p := strings.TrimRight(string(b), "\r\n")
	if p == "" {
		return "", fmt.Errorf("etcd user %q: the password file %s is empty", c.User, c.PasswordFile)
	}
	return p, nil
}

// logInNow logs the client in, or says why it cannot. The user's own
// record is the one thing every user may read.
func logInNow(ctx context.Context, cli *clientv3.Client, c Config) error {
	ctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	_, err := cli.UserGet(ctx, c.User)
	switch {
	case err == nil, errors.Is(err, rpctypes.ErrUserNotFound):
		// Not found: authentication is off, or the login would have
		// failed first.
		return nil
	case rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCNotSupportedForLearner):
		// A learner cannot log anyone in: the first call that reaches a
		// voting member does.
		c.Logger.Info("etcd: a learner answered; logging in at the first call a voting member answers", "user", c.User)
		return nil
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return c.wrong(fmt.Errorf("etcd user %q did not log in: the password in %s is wrong, or there is no such user (%w)", c.User, c.PasswordFile, err))
	}
	return fmt.Errorf("%s: log in as %q: %w", c.name(), c.User, err)
}

// logIn logs the client in once a member answers: a stream opened before
// any call logged in would be refused.
func logIn(cli *clientv3.Client, c Config) {
	for cli.Ctx().Err() == nil {
		err := logInNow(cli.Ctx(), cli, c)
		if err == nil {
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			c.Logger.Warn("etcd: log in", "user", c.User, "error", err)
			return
		}
		select {
		case <-cli.Ctx().Done():
		case <-time.After(time.Second):
		}
	}
}

// errNoAnswer: a member accepted the connection and answered nothing in
// time.
var errNoAnswer = errors.New("no answer")

// requireRoot fails unless authentication is off or the client's user
// holds the root role.
func requireRoot(ctx context.Context, cli *clientv3.Client, c Config, files *tlsfiles.Client) error {
	actx, cancel := context.WithTimeout(ctx, c.RequestTimeout)
	defer cancel()
	st, err := cli.AuthStatus(actx)
	if err != nil && actx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w within the request timeout of %s: %w", errNoAnswer, c.RequestTimeout, err)
	}
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%s: ask whether authentication is on: it serves no auth API: a datastore behind etcd's API such as kine? etcd-backup serve and snapshot take it with --source etcd-api, restore --to with --to-source etcd-api; the other commands need etcd: %w", c.name(), err)
	}
	if err != nil {
		return fmt.Errorf("%s: ask whether authentication is on: %w", c.name(), err)
	}
	if !st.Enabled {
		return nil
	}
	user, how := c.User, ""
	if user == "" && files != nil && files.Leaf() != nil {
		user, how = files.Leaf().Subject.CommonName, " (the client certificate's common name)"
	}
	if user == "" {
		return c.wrong(errors.New("etcd requires authentication and this client has no identity: give a user and its password file, or a client certificate whose common name is a user with the root role"))
	}
	resp, err := cli.UserGet(actx, user)
	if err != nil {
		return c.wrong(fmt.Errorf("etcd user %q%s: %w; snapshots, hashes, defragmentation and membership changes need a user with the root role", user, how, err))
	}
	if !slices.Contains(resp.Roles, rootRole) {
		return c.wrong(fmt.Errorf("etcd user %q%s has the roles %v but not %q, which etcd requires for snapshots, hashes, defragmentation and membership changes: grant it (etcdctl user grant-role %s root)",
			user, how, resp.Roles, rootRole, user))
	}
	return nil
}

// bound gives each unary call without a deadline one of d. The client's
// own retries run outside this and try a call again when its deadline
// passed while the caller's did not, so the expiry is returned as an
// error they do not retry: the caller gets it after d, not after a
// hundred tries of d.
func bound(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := ctx.Deadline(); ok {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		bctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		err := invoker(bctx, method, req, reply, cc, opts...)
		if err != nil && bctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: no answer within the request timeout of %s: %w", method, d, context.DeadlineExceeded)
		}
		return err
	}
}
