package etcdtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/internal/freeport"
)

// Options configure a cluster started by Start. The zero value starts one
// member with etcd's defaults, silent logs, in a directory the test removes.
type Options struct {
	// Members is the number of voting members; 0 means 1.
	Members int
	// Dir holds one data dir per member (<Dir>/<name>); "" means t.TempDir().
	Dir string
	// Token is the initial cluster token; "" means "etcdtest".
	Token string
	// SnapshotCount is etcd's --snapshot-count; 0 keeps etcd's default.
	SnapshotCount uint64
	// QuotaBackendBytes is etcd's --quota-backend-bytes; 0 keeps the default.
	QuotaBackendBytes int64
	// UnsafeNoFsync skips fsync in etcd for speed; leave it false in tests
	// that look at what reached the disk.
	UnsafeNoFsync bool
	// Logger receives etcd's logs; nil discards them.
	Logger *zap.Logger
	// StartTimeout bounds how long a member may take to become ready;
	// 0 means 60s.
	StartTimeout time.Duration
	// TLS serves clients and peers over https with certificates of a CA
	// made for the cluster (Cluster.Security), and requires client
	// certificates on both.
	TLS bool
	// Auth turns etcd's authentication on once the cluster runs, with the
	// users of Users. The clients this package makes log in as root.
	Auth bool
	// Security reuses another cluster's certificates and passwords
	// instead of making new ones: a data dir restored from that cluster
	// keeps its users, and one set of flags reaches both.
	Security *Security
	// DedicatedWAL keeps each member's WAL outside its data dir, in
	// Member.WALDir (the data dir's path with .wal appended), as etcd's
	// wal-dir does.
	DedicatedWAL bool
}

// Users are the users Options.Auth creates, with their passwords in
// files under the cluster's directory: root and backup hold the root
// role, reader may only read keys.
var Users = []string{"root", "backup", "reader"}

// Cluster is a set of members started together.
type Cluster struct {
	Members []*Member
	// Security holds the certificates (Options.TLS) and the users'
	// passwords (Options.Auth); nil with neither.
	Security *Security
	opts     Options
}

// Member is one etcd member running in this process.
type Member struct {
	Name string
	Dir  string
	// WALDir is the member's wal-dir with Options.DedicatedWAL, else "".
	WALDir    string
	PeerURL   url.URL
	ClientURL url.URL
	// InitialCluster and ClusterState are what the member was started with;
	// Restart starts it again with ClusterState "existing".
	InitialCluster string
	ClusterState   string

	opts     Options
	security *Security
	mu       sync.Mutex
	etcd     *embed.Etcd
}

// Start starts opts.Members members as one new cluster, waits until every
// member is ready and a leader is elected, and stops them when the test ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	opts = opts.withDefaults(t)
	n := opts.Members
	sec := newSecurity(t, opts)

	// Ports are picked free and then released, so another process may take
	// one before etcd binds it; that is rare, and a retry with new ports
	// fixes it.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c := &Cluster{opts: opts, Security: sec}
		var initial []string
		for i := 0; i < n; i++ {
			peer, client, err := sec.freeURLs()
			if err != nil {
				t.Fatalf("etcdtest: %v", err)
			}
			name := fmt.Sprintf("m%d", i)
			c.Members = append(c.Members, &Member{
				Name:      name,
				Dir:       filepath.Join(opts.Dir, fmt.Sprintf("%s-%d", name, attempt)),
				PeerURL:   peer,
				ClientURL: client,
				opts:      opts,
				security:  sec,
			})
			initial = append(initial, name+"="+peer.String())
		}
		for _, m := range c.Members {
			m.InitialCluster = strings.Join(initial, ",")
			m.ClusterState = embed.ClusterStateFlagNew
		}
		lastErr = c.startAll()
		if lastErr == nil {
			t.Cleanup(c.Close)
			if err := c.WaitLeader(context.Background()); err != nil {
				t.Fatalf("etcdtest: %v", err)
			}
			if opts.Auth {
				ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
				err := sec.enableAuth(ctx, c.Endpoints())
				cancel()
				if err != nil {
					t.Fatalf("etcdtest: %v", err)
				}
			}
			return c
		}
		c.Close()
		if !isAddrInUse(lastErr) {
			break
		}
	}
	t.Fatalf("etcdtest: start %d member(s): %v", n, lastErr)
	return nil
}

// Reserve names opts.Members members of one new cluster and picks their
// URLs and data dirs without starting them: the test starts each its own
// way (a wrapper, a division of its own) from Member.Config.
func Reserve(t testing.TB, opts Options) *Cluster {
	t.Helper()
	opts = opts.withDefaults(t)
	sec := newSecurity(t, opts)
	c := &Cluster{opts: opts, Security: sec}
	var initial []string
	for i := range opts.Members {
		peer, client, err := sec.freeURLs()
		if err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		name := fmt.Sprintf("m%d", i)
		c.Members = append(c.Members, &Member{Name: name, Dir: filepath.Join(opts.Dir, name), PeerURL: peer, ClientURL: client, opts: opts, security: sec})
		initial = append(initial, name+"="+peer.String())
	}
	for _, m := range c.Members {
		m.InitialCluster, m.ClusterState = strings.Join(initial, ","), embed.ClusterStateFlagNew
	}
	return c
}

func (o Options) withDefaults(t testing.TB) Options {
	if o.Members <= 0 {
		o.Members = 1
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Token == "" {
		o.Token = "etcdtest"
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	return o
}

// startAll starts every member concurrently: members of a new cluster only
// become ready once a quorum of them runs.
func (c *Cluster) startAll() error {
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.start()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops every member that still runs.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.Stop()
	}
}

// Endpoints returns the client URLs of all members.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL.String())
	}
	return eps
}

// Client returns a client to every member, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return newClient(t, c.Security, c.Endpoints())
}

// ClientConfig is how this package's clients reach the cluster: its TLS
// files and, with Options.Auth, the root user.
func (c *Cluster) ClientConfig() etcdclient.Config {
	return c.Security.clientConfig(c.Endpoints())
}

// Leader returns the member that is leader now, or nil when none is known.
func (c *Cluster) Leader() *Member {
	for _, m := range c.Members {
		e := m.Etcd()
		if e == nil {
			continue
		}
		lead := e.Server.Leader()
		for _, o := range c.Members {
			if oe := o.Etcd(); oe != nil && oe.Server.MemberID() == lead {
				return o
			}
		}
	}
	return nil
}

// WaitLeader waits until the running members agree on a leader and each of
// them answers a linearizable read.
func (c *Cluster) WaitLeader(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	for _, m := range c.Members {
		if m.Etcd() == nil {
			continue
		}
		if err := m.waitServing(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Member returns the member called name, or nil.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// AddMemberOptions describe a member that joins a running cluster.
type AddMemberOptions struct {
	// Name of the new member; "" means m<index>.
	Name string
	// Dir is its data dir; "" means a new directory under the cluster's Dir.
	Dir string
	// Learner adds it as a non-voting learner.
	Learner bool
}

// AddMember adds a member to the running cluster through the membership
// API, starts it with initial-cluster-state "existing" and waits until it
// serves reads (a learner answers serializable reads only).
func (c *Cluster) AddMember(t testing.TB, opts AddMemberOptions) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("m%d", len(c.Members))
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(c.opts.Dir, opts.Name+"-added")
	}
	peer, client, err := c.Security.freeURLs()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	cli := c.Client(t)
	var resp *clientv3.MemberAddResponse
	for {
		if opts.Learner {
			resp, err = cli.MemberAddAsLearner(ctx, []string{peer.String()})
		} else {
			resp, err = cli.MemberAdd(ctx, []string{peer.String()})
		}
		// etcd refuses membership changes until every member has been
		// connected for a few seconds (strict reconfig check); a member
		// restarted just before is the usual reason.
		if err == nil || !strings.Contains(err.Error(), "unhealthy cluster") || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("etcdtest: add member %s: %v", opts.Name, err)
	}
	var initial []string
	for _, pm := range resp.Members {
		name := pm.Name
		if pm.ID == resp.Member.ID {
			name = opts.Name
		}
		for _, u := range pm.PeerURLs {
			initial = append(initial, name+"="+u)
		}
	}
	m := &Member{
		Name:           opts.Name,
		Dir:            opts.Dir,
		PeerURL:        peer,
		ClientURL:      client,
		InitialCluster: strings.Join(initial, ","),
		ClusterState:   embed.ClusterStateFlagExisting,
		opts:           c.opts,
		security:       c.Security,
	}
	if err := m.start(); err != nil {
		t.Fatalf("etcdtest: start added member %s: %v", opts.Name, err)
	}
	c.Members = append(c.Members, m)
	t.Cleanup(m.Stop)
	if err := m.waitStarted(ctx); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return m
}

// Etcd returns the running embedded server, or nil when stopped.
func (m *Member) Etcd() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd
}

// Running reports whether the member runs.
func (m *Member) Running() bool { return m.Etcd() != nil }

// Client returns a client to this member only, closed when the test ends.
func (m *Member) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return newClient(t, m.security, []string{m.ClientURL.String()})
}

// Stop stops the member gracefully (a leader hands leadership over first).
// Stopping a stopped member does nothing.
func (m *Member) Stop() {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Kill stops the member without leadership transfer and without waiting for
// in-flight requests, the closest an in-process member gets to a crash.
func (m *Member) Kill() {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Server.HardStop()
		e.Close()
	}
}

// Restart starts a stopped member again on the same data dir and URLs and
// waits until it serves.
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	m.ClusterState = embed.ClusterStateFlagExisting
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.StartTimeout)
	defer cancel()
	if err := m.restart(ctx); err != nil {
		t.Fatalf("etcdtest: restart %s: %v", m.Name, err)
	}
	if err := m.waitStarted(ctx); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
}

// Config returns the embed configuration the member starts with; tests that
// start a member by other means (a wrapper, a restored data dir) use it as a
// template.
func (m *Member) Config() *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.Dir
	if m.opts.DedicatedWAL {
		m.WALDir = m.Dir + ".wal"
		cfg.WalDir = m.WALDir
	}
	cfg.ListenPeerUrls = []url.URL{m.PeerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.PeerURL}
	cfg.ListenClientUrls = []url.URL{m.ClientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.ClientURL}
	cfg.InitialCluster = m.InitialCluster
	cfg.ClusterState = m.ClusterState
	cfg.InitialClusterToken = m.opts.Token
	if m.opts.SnapshotCount > 0 {
		cfg.SnapshotCount = m.opts.SnapshotCount
	}
	cfg.QuotaBackendBytes = m.opts.QuotaBackendBytes
	cfg.UnsafeNoFsync = m.opts.UnsafeNoFsync
	// Shorter ticks than etcd's 100/1000 make elections in tests quick,
	// while still tolerating a loaded 2-core machine.
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(m.opts.Logger.Named(m.Name))
	// Logins are part of most tests with authentication: the cheapest
	// hash keeps them quick.
	cfg.BcryptCost = uint(bcrypt.MinCost)
	m.security.configure(cfg)
	return cfg
}

// restart starts the member again on the ports it had. Another process
// may hold one of them a moment after the last run let go (a port probe,
// a test binary picking from the whole range): a restart waits for the
// port rather than failing, and names the holder if it never lets go.
func (m *Member) restart(ctx context.Context) error {
	for {
		err := m.start()
		if !isAddrInUse(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (held by: %s)", err, portHolders(m.PeerURL.Port(), m.ClientURL.Port()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd != nil {
		return fmt.Errorf("member %s already runs", m.Name)
	}
	e, err := embed.StartEtcd(m.Config())
	if err != nil {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("member %s: %w", m.Name, err)
	case <-time.After(m.opts.StartTimeout):
		e.Server.HardStop()
		e.Close()
		return fmt.Errorf("member %s: not ready after %s", m.Name, m.opts.StartTimeout)
	}
	m.etcd = e
	return nil
}

// waitStarted waits until the member serves: a voting member answers a
// linearizable read, a learner a serializable one.
func (m *Member) waitStarted(ctx context.Context) error {
	e := m.Etcd()
	if e == nil {
		return fmt.Errorf("member %s is not running", m.Name)
	}
	if e.Server.IsLearner() {
		return m.pollLearner(ctx)
	}
	return m.waitServing(ctx)
}

// pollLearner waits until the learner answers Status: a learner logs no
// one in, so with authentication on it serves no read to a client.
func (m *Member) pollLearner(ctx context.Context) error {
	conn := m.security.clientConfig([]string{m.ClientURL.String()})
	conn.User, conn.PasswordFile = "", ""
	return m.poll(ctx, conn, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.Status(ctx, m.ClientURL.String())
		return err
	})
}

// waitServing waits until the member answers a linearizable read.
func (m *Member) waitServing(ctx context.Context) error {
	return m.poll(ctx, m.security.clientConfig([]string{m.ClientURL.String()}), func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.Get(ctx, "etcdtest-ready")
		return err
	})
}

// poll asks the member through a client made with conn until ask
// succeeds or ctx ends.
func (m *Member) poll(ctx context.Context, conn etcdclient.Config, ask func(context.Context, *clientv3.Client) error) error {
	var cli *clientv3.Client
	defer func() {
		if cli != nil {
			_ = cli.Close()
		}
	}()
	for {
		var err error
		if cli == nil {
			cli, err = etcdclient.New(ctx, conn)
		}
		if cli != nil {
			actx, cancel := context.WithTimeout(ctx, time.Second)
			err = ask(actx, cli)
			cancel()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %s not serving: %w (last error: %w)", m.Name, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func newClient(t testing.TB, sec *Security, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := etcdclient.New(context.Background(), sec.clientConfig(endpoints))
	if err != nil {
		t.Fatalf("etcdtest: client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// FreeURLs returns a peer and a client URL on loopback ports that were free
// a moment ago.
func FreeURLs() (peer, client url.URL, err error) {
	p, err := FreePort()
	if err != nil {
		return peer, client, err
	}
	c, err := FreePort()
	if err != nil {
		return peer, client, err
	}
	peer = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	client = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", c)}
	return peer, client, nil
}

// FreePort returns a loopback TCP port that was free a moment ago, that
// it has not returned before in this process, and that no other process
// picking through it at the same time returns: a test binary's members
// and emulators never share a port with another test binary's.
func FreePort() (int, error) { return freeport.Pick() }

func isAddrInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

// StartDataDir starts a single member from an existing data dir, such as
// one a restore built, under the name and peer URL it was built for.
func StartDataDir(t testing.TB, opts Options, name, dir string, peer url.URL) *Cluster {
	t.Helper()
	opts = opts.withDefaults(t)
	sec := newSecurity(t, opts)
	_, client, err := sec.freeURLs()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	m := &Member{
		Name: name, Dir: dir, PeerURL: peer, ClientURL: client, opts: opts, security: sec,
		InitialCluster: name + "=" + peer.String(), ClusterState: embed.ClusterStateFlagNew,
	}
	c := &Cluster{opts: opts, Members: []*Member{m}, Security: sec}
	if err := c.startAll(); err != nil {
		c.Close()
		t.Fatalf("etcdtest: start %s from %s: %v", name, dir, err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeader(context.Background()); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return c
}

// NewMember reserves URLs and a data dir for a member of this cluster that
// the test starts itself, with StartWith, after deciding how. It is
// listed in c.Members and stopped when the test ends.
func (c *Cluster) NewMember(t testing.TB, name string) *Member {
	t.Helper()
	peer, client, err := c.Security.freeURLs()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	m := &Member{Name: name, Dir: filepath.Join(c.opts.Dir, name+"-new"), PeerURL: peer, ClientURL: client, opts: c.opts, security: c.Security}
	c.Members = append(c.Members, m)
	t.Cleanup(m.Stop)
	return m
}

// StartWith starts the member with the initial cluster and state given
// (as a membership decision made them) and waits until it serves: a
// learner answers serializable reads only.
func (m *Member) StartWith(ctx context.Context, initialCluster, state string) error {
	m.InitialCluster, m.ClusterState = initialCluster, state
	if err := m.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.StartTimeout)
	defer cancel()
	return m.waitStarted(ctx)
}

// MoveLeader hands leadership from the current leader to another running
// member and returns the new leader.
func (c *Cluster) MoveLeader(t testing.TB) *Member {
	t.Helper()
	old := c.Leader()
	if old == nil {
		t.Fatal("etcdtest: no leader to move")
	}
	for _, m := range c.Members {
		if e := m.Etcd(); m != old && e != nil {
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
			defer cancel()
			if _, err := old.Client(t).MoveLeader(ctx, uint64(e.Server.MemberID())); err != nil {
				t.Fatalf("etcdtest: move the leader from %s to %s: %v", old.Name, m.Name, err)
			}
			return m
		}
	}
	t.Fatal("etcdtest: no other running member to lead")
	return nil
}

// ConfigFile writes the member's configuration as etcd's configuration
// file takes it (what etcd-wrapper --config reads) into dir and returns
// its path: names, URLs, data dir, initial cluster and, with TLS, the
// transport security of Config.
func (m *Member) ConfigFile(t testing.TB, dir string) string {
	t.Helper()
	cfg := m.Config()
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ndata-dir: %s\nlisten-peer-urls: %s\ninitial-advertise-peer-urls: %[3]s\n", m.Name, m.Dir, m.PeerURL.String())
	fmt.Fprintf(&b, "listen-client-urls: %s\nadvertise-client-urls: %[1]s\n", m.ClientURL.String())
	fmt.Fprintf(&b, "initial-cluster: %s\ninitial-cluster-token: %s\ninitial-cluster-state: %s\n", m.InitialCluster, cfg.InitialClusterToken, cmp.Or(m.ClusterState, "new"))
	fmt.Fprintf(&b, "heartbeat-interval: %d\nelection-timeout: %d\nunsafe-no-fsync: %t\n", cfg.TickMs, cfg.ElectionMs, cfg.UnsafeNoFsync)
	for _, tr := range []struct {
		key  string
		info transport.TLSInfo
	}{{"client-transport-security", cfg.ClientTLSInfo}, {"peer-transport-security", cfg.PeerTLSInfo}} {
		if tr.info.CertFile != "" {
			fmt.Fprintf(&b, "%s:\n  cert-file: %s\n  key-file: %s\n  trusted-ca-file: %s\n  client-cert-auth: %t\n",
				tr.key, tr.info.CertFile, tr.info.KeyFile, tr.info.TrustedCAFile, tr.info.ClientCertAuth)
		}
	}
	path := filepath.Join(dir, m.Name+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return path
}

// Remove removes m from the cluster on purpose, as an operator or
// etcd-druid's scale-in does, while it runs, through the other members,
// and waits until m applied its own removal and stopped: its data dir
// then names it in its members_removed bucket. The member stays in
// c.Members, stopped.
func (c *Cluster) Remove(t testing.TB, m *Member) {
	t.Helper()
	e := m.Etcd()
	if e == nil {
		t.Fatalf("etcdtest: remove %s: it does not run", m.Name)
	}
	id := uint64(e.Server.MemberID())
	var others []string
	for _, o := range c.Members {
		if o != m && o.Running() {
			others = append(others, o.ClientURL.String())
		}
	}
	cli := newClient(t, m.security, others)
	ctx, cancel := context.WithTimeout(t.Context(), c.opts.StartTimeout)
	defer cancel()
	// etcd refuses to remove a member while the others have not been
	// connected to each other for long enough: it is asked again.
	var err error
	for {
		if _, err = cli.MemberRemove(ctx, id); err == nil || !strings.Contains(err.Error(), "unhealthy cluster") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("etcdtest: remove %s: %v", m.Name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err != nil {
		t.Fatalf("etcdtest: remove %s: %v", m.Name, err)
	}
	select {
	case <-e.Server.StopNotify():
	case <-ctx.Done():
		t.Fatalf("etcdtest: %s did not stop after its removal", m.Name)
	}
	m.Stop()
}
