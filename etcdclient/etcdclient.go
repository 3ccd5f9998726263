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

	"github.com/etcdkit/etcdkit/tlsfiles"
)

// ErrUnreachable is New's error when no endpoint accepts a connection: a
// caller that may start before etcd (a sidecar, a member asking its
// peers) waits and tries again; an operator's command reports it.
var ErrUnreachable = errors.New("no etcd member answers")

// rootRole is etcd's role of the calls it allows administrators only.
const rootRole = "root"

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
	// Logger: nil discards.
	Logger *slog.Logger
}

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
	name := fmt.Sprintf("etcd %s", strings.Join(c.Endpoints, ","))
	secure, err := scheme(c.Endpoints)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var files *tlsfiles.Client
	if secure {
		if files, err = c.TLS.NewClient(c.Logger); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	} else if !c.TLS.IsZero() {
		c.Logger.Warn("etcd: TLS files are given but the endpoints are http://, so they are not used; give https:// URLs to use TLS", "endpoints", c.Endpoints)
	}
	password, err := c.password()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := probe(ctx, c, files); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cfg := clientv3.Config{
		Endpoints:            c.Endpoints,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Username:             c.User,
		Password:             password,
		Logger:               zap.NewNop(),
		DialOptions:          []grpc.DialOption{grpc.WithChainUnaryInterceptor(bound(c.RequestTimeout))},
	}
	if files != nil {
		// Appended after the client's own credentials, so these win.
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithTransportCredentials(&credentials{files: files}))
	}
	cli, err := clientv3.New(cfg)
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed):
		return nil, fmt.Errorf("%s: etcd user %q did not log in: the password in %s is wrong, or there is no such user (%w)", name, c.User, c.PasswordFile, err)
	case err != nil && c.User != "":
		return nil, fmt.Errorf("%s: log in as %q: %w", name, c.User, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if c.RequireRoot {
		if err := requireRoot(ctx, cli, c, files); err != nil {
			_ = cli.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
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

// requireRoot fails unless authentication is off or the client's user
// holds the root role.
func requireRoot(ctx context.Context, cli *clientv3.Client, c Config, files *tlsfiles.Client) error {
	actx, cancel := context.WithTimeout(ctx, c.RequestTimeout)
	defer cancel()
	st, err := cli.AuthStatus(actx)
	if err != nil {
		return fmt.Errorf("ask whether authentication is on: %w", err)
	}
	if !st.Enabled {
		return nil
	}
	user, how := c.User, "the user"
	if user == "" && files != nil && files.Leaf() != nil {
		user, how = files.Leaf().Subject.CommonName, "the client certificate's common name"
	}
	if user == "" {
		return errors.New("etcd requires authentication and this client has no identity: give a user and its password file, or a client certificate whose common name is a user with the root role")
	}
	resp, err := cli.UserGet(actx, user)
	if err != nil {
		return fmt.Errorf("etcd user %q (%s): %w; snapshots, hashes, defragmentation and membership changes need a user with the root role", user, how, err)
	}
	if !slices.Contains(resp.Roles, rootRole) {
		return fmt.Errorf("etcd user %q (%s) has the roles %v but not %q, which etcd requires for snapshots, hashes, defragmentation and membership changes: grant it (etcdctl user grant-role %s root)",
			user, how, resp.Roles, rootRole, user)
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
