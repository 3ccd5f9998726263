package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/cmd/internal/cli"
	"github.com/etcdkit/etcdkit/defrag"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// brStore is etcd-backup-restore's description of a store: a provider, a
// container (or STORAGE_CONTAINER) and a prefix, with prefix "source-"
// for the source of a copy.
type brStore struct {
	provider, container, endpoint, prefix, tempDir string
}

func (b *brStore) flags(fs *pflag.FlagSet, prefix string) {
	fs.StringVar(&b.provider, prefix+"storage-provider", "", "snapshot storage provider")
	fs.StringVar(&b.container, prefix+"store-container", "", "container which will be used as snapstore")
	fs.StringVar(&b.endpoint, prefix+"store-endpoint-override", "", "endpoint that will be used to override the default endpoint of the storage provider")
	fs.StringVar(&b.prefix, prefix+"store-prefix", "", "prefix or directory inside container under which snapstore is created")
	fs.Uint(prefix+"max-parallel-chunk-uploads", 5, "maximum number of parallel chunk uploads allowed")
	fs.Int64(prefix+"min-chunk-size", 5<<20, "Minimum size for multipart chunk upload")
	fs.StringVar(&b.tempDir, prefix+"snapstore-temp-directory", "/tmp", "temporary directory for processing")
}

// url is the store URL the description names; containerEnv is read when
// no container is given. "" when there is no provider: no store.
func (b *brStore) url(containerEnv string) (string, error) {
	container := b.container
	if container == "" {
		container = os.Getenv(containerEnv)
	}
	q := url.Values{}
	if b.endpoint != "" {
		q.Set("endpoint", b.endpoint)
	}
	var scheme string
	switch b.provider {
	case "":
		return "", nil
	case "Local", "local":
		// etcd-backup-restore keeps a local store under the home
		// directory, whatever the container says.
		if container == "" {
			container = "default.bkp"
		}
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("the Local provider's directory: %w", err)
		}
		return (&url.URL{Scheme: "file", Path: filepath.Join(home, container, b.prefix)}).String(), nil
	case "S3", "aws", "s3":
		scheme = "s3"
	case "ECS", "OCS", "OSS":
		// S3-compatible, each with its own credentials.
		scheme = "s3"
		q.Set("provider", strings.ToLower(b.provider))
	case "GCS", "gcp", "gcs":
		scheme = "gs"
	case "ABS", "azure", "abs":
		scheme = "azblob"
	case "Swift", "openstack", "swift":
		scheme = "swift"
	default:
		return "", fmt.Errorf("storage provider %q: etcdkit stores backups on S3 (and ECS, OCS, OSS and other S3-compatible stores), GCS, ABS, Swift and Local", b.provider)
	}
	if container == "" {
		return "", fmt.Errorf("storage provider %s: no container: set --%s or %s", b.provider, "store-container", containerEnv)
	}
	u := url.URL{Scheme: scheme, Host: container, Path: path.Join("/", b.prefix), RawQuery: q.Encode()}
	return u.String(), nil
}

// urlFor is url for a store whose cloud credentials are read from
// variables with envPrefix (SOURCE_, SECONDARY_), as etcd-backup-restore
// reads them.
func (b *brStore) urlFor(containerEnv, envPrefix string) (string, error) {
	raw, err := b.url(containerEnv)
	if err != nil || raw == "" {
		return raw, err
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "file" {
		return raw, err
	}
	q := u.Query()
	q.Set("env-prefix", envPrefix)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// brConn is etcd-backup-restore's connection to etcd (its
// EtcdConnectionConfig's flags).
type brConn struct {
	endpoints, serviceEndpoints           []string
	cacert, cert, key, username, password string
	insecureTransport, insecureSkipVerify bool
	connTimeout, defragTimeout            time.Duration
}

func (c *brConn) flags(fs *pflag.FlagSet) {
	fs.StringSliceVarP(&c.endpoints, "endpoints", "e", []string{"http://127.0.0.1:2379"}, "comma separated list of etcd endpoints")
	fs.StringSliceVar(&c.serviceEndpoints, "service-endpoints", nil, "comma separated list of etcd endpoints that are used for etcd-backup-restore to connect to etcd through a (Kubernetes) service")
	fs.StringVar(&c.cacert, "cacert", "", "verify certificates of TLS-enabled secure servers using this CA bundle")
	fs.StringVar(&c.cert, "cert", "", "identify secure client using this TLS certificate file")
	fs.StringVar(&c.key, "key", "", "identify secure client using this TLS key file")
	fs.BoolVar(&c.insecureTransport, "insecure-transport", true, "disable transport security for client connections")
	fs.BoolVar(&c.insecureSkipVerify, "insecure-skip-tls-verify", true, "skip server certificate verification")
	fs.StringVar(&c.username, "etcd-username", "", "etcd server username, if one is required")
	fs.StringVar(&c.password, "etcd-password", "", "etcd server password, if one is required")
	fs.DurationVar(&c.connTimeout, "etcd-connection-timeout", 30*time.Second, "etcd client connection timeout")
	fs.Duration("etcd-snapshot-timeout", 15*time.Minute, "timeout duration for taking etcd snapshots")
	fs.DurationVar(&c.defragTimeout, "etcd-defrag-timeout", 8*time.Minute, "timeout duration for etcd defrag call")
}

// brMember is etcd-backup-restore's restoration flags: the member a
// restore builds, and knobs of its embedded etcd.
type brMember struct {
	dataDir, name, initialCluster, token string
	peerURLs                             []string
}

func (m *brMember) flags(fs *pflag.FlagSet) {
	fs.StringVarP(&m.dataDir, "data-dir", "d", "default.etcd", "path to the data directory")
	fs.StringVar(&m.name, "name", member.DefaultName, "human-readable name for this member")
	fs.StringVar(&m.initialCluster, "initial-cluster", "default=http://localhost:2380", "initial cluster configuration for restore bootstrap")
	fs.StringVar(&m.token, "initial-cluster-token", member.DefaultToken, "initial cluster token for the etcd cluster during restore bootstrap")
	fs.StringArrayVar(&m.peerURLs, "initial-advertise-peer-urls", []string{member.DefaultPeerURL}, "list of this member's peer URLs to advertise to the rest of the cluster")
	fs.String("restoration-temp-snapshots-dir", "default.restoration.tmp", "path to the temporary directory to store snapshot files during restoration")
	fs.Int64("embedded-etcd-quota-bytes", 8<<30, "maximum backend quota for the embedded etcd used for applying delta snapshots")
	fs.Uint("max-fetchers", 6, "maximum number of threads that will fetch delta snapshots in parallel")
	fs.Uint("max-request-bytes", 10<<20, "Maximum client request size in bytes the server will accept")
	fs.Uint("max-txn-ops", 10240, "Maximum number of operations permitted in a transaction")
	fs.Int("max-call-send-message-size", 10<<20, "maximum size of message that the client sends")
	fs.Bool("skip-hash-check", false, "ignore snapshot integrity hash value (required if copied from data directory)")
	fs.String("auto-compaction-mode", "periodic", "mode for auto-compaction: 'periodic' for duration based retention. 'revision' for revision number based retention.")
	fs.String("auto-compaction-retention", "30m", "Auto-compaction retention length.")
}

// spec is the member the flags describe.
func (m *brMember) spec() member.Spec {
	return member.Spec{DataDir: m.dataDir, Name: m.name, PeerURLs: m.peerURLs, InitialCluster: m.initialCluster, Token: m.token}
}

// brSnapshots is etcd-backup-restore's snapshotter flags, with its
// compression and backoff ones.
type brSnapshots struct {
	schedule, gcPolicy, compression       string
	deltaPeriod, deltaRetention, gcPeriod time.Duration
	deltaMemory, maxBackups               uint
	compress                              bool
}

func (b *brSnapshots) flags(fs *pflag.FlagSet) {
	fs.StringVarP(&b.schedule, "schedule", "s", "0 */1 * * *", "schedule for snapshots")
	fs.DurationVar(&b.deltaPeriod, "delta-snapshot-period", 20*time.Second, "Period after which delta snapshot will be persisted. If this value is set to be lesser than 1, delta snapshotting will be disabled.")
	fs.DurationVar(&b.deltaRetention, "delta-snapshot-retention-period", 0, "Defines the retention period for older delta snapshots, excluding the latest snapshot set which is always retained for data safety.")
	fs.UintVar(&b.deltaMemory, "delta-snapshot-memory-limit", 10<<20, "memory limit after which delta snapshots will be taken")
	fs.DurationVar(&b.gcPeriod, "garbage-collection-period", time.Minute, "Period for garbage collecting old backups")
	fs.StringVar(&b.gcPolicy, "garbage-collection-policy", "Exponential", "Policy for garbage collecting old backups")
	fs.UintVarP(&b.maxBackups, "max-backups", "m", 7, "maximum number of previous backups to keep")
	fs.BoolVar(&b.compress, "compress-snapshots", true, "whether to compress the snapshots or not")
	fs.StringVar(&b.compression, "compression-policy", "gzip", "Policy for compressing the snapshots")
	fs.Uint("backoff-attempt-limit", 6, "threshold no. of attempt limit")
	fs.Uint("backoff-multiplier", 2, "multiplicative factor for backoff mechanism")
	fs.Duration("backoff-threshold-time", 128*time.Second, "upper bound backoff time")
}

// brServer holds etcd-backup-restore's server flags, as etcd-druid passes
// them.
type brServer struct {
	store, secondary brStore
	syncSecondary    bool
	syncPeriod       time.Duration
	// etcdkit's own flags: etcd-backup-restore applies the first site's
	// retention to the second, and takes every full on the schedule's
	// minute at full speed.
	secondaryRetention string
	fullSplay          time.Duration
	bandwidth          cli.Bandwidth

	brSnapshots
	brConn
	brMember
	defragSchedule string

	leases leaseFlags

	port                  uint
	serverCert, serverKey string
	configFile            string
	profiling             bool
	useEtcdWrapper        bool
	logLevel              brLogLevel
}

// logIgnored logs each flag given that means nothing to etcdkit, with why.
func logIgnored(fs *pflag.FlagSet, command string, log *slog.Logger) {
	fs.Visit(func(f *pflag.Flag) {
		if why, ok := ignoredFlags[f.Name]; ok {
			log.Info("etcd-backup "+command+": flag ignored", "flag", "--"+f.Name, "value", f.Value.String(), "why", why)
		}
	})
}

// ignoredFlags are etcd-backup-restore's flags that mean nothing to
// etcdkit, with why.
var ignoredFlags = map[string]string{
	"embedded-etcd-quota-bytes":               "deltas are replayed into the database directly, with no embedded etcd",
	"restoration-temp-snapshots-dir":          "a restore keeps no temporary copies of snapshots",
	"auto-compaction-mode":                    "compaction is etcd's own setting",
	"auto-compaction-retention":               "compaction is etcd's own setting",
	"max-fetchers":                            "a restore downloads the chain in parallel with bounded memory",
	"max-request-bytes":                       "no embedded etcd",
	"max-txn-ops":                             "no embedded etcd",
	"max-call-send-message-size":              "no embedded etcd",
	"skip-hash-check":                         "every checksum is verified",
	"max-parallel-chunk-uploads":              "the store's uploads are parallel with bounded memory",
	"min-chunk-size":                          "the store chooses its part size",
	"backoff-attempt-limit":                   "failures are retried with the sidecar's own backoff",
	"backoff-multiplier":                      "failures are retried with the sidecar's own backoff",
	"backoff-threshold-time":                  "failures are retried with the sidecar's own backoff",
	"reelection-period":                       "the sidecar follows etcd's leader itself, every 500ms",
	"etcd-connection-timeout-leader-election": "the sidecar follows etcd's leader itself",
	"etcd-snapshot-timeout":                   "a snapshot is bounded by the store's timeout",
	"secondary-max-parallel-chunk-uploads":    "the store's uploads are parallel with bounded memory",
	"secondary-min-chunk-size":                "the store chooses its part size",
	"secondary-snapstore-temp-directory":      "copies to the second site stream from store to store",
}

func (b *brServer) flags(fs *pflag.FlagSet) {
	b.store.flags(fs, "")
	b.secondary.flags(fs, "secondary-")
	fs.BoolVar(&b.syncSecondary, "secondary-backup-sync-enabled", false, "enable secondary backup-sync feature")
	fs.DurationVar(&b.syncPeriod, "secondary-backup-sync-period", time.Hour, "period for periodic backup sync operations")
	fs.StringVar(&b.secondaryRetention, "secondary-retention", "same", "etcdkit's own: "+secondaryRetentionHelp)
	fs.DurationVar(&b.fullSplay, "full-splay", 0, "etcdkit's own: "+fullSplayHelp)
	b.bandwidth.Flags(fs, true)
	b.brSnapshots.flags(fs)
	brDefragFlag(fs, &b.defragSchedule)
	b.brConn.flags(fs)
	b.brMember.flags(fs)
	fs.Duration("etcd-connection-timeout-leader-election", 5*time.Second, "timeout duration of etcd client connection during leader election")
	fs.Duration("reelection-period", 5*time.Second, "period after which election will be re-triggered to check the leadership status")

	fs.UintVarP(&b.port, "server-port", "p", 8080, "port on which server should listen")
	fs.StringVar(&b.serverCert, "server-cert", "", "TLS certificate file for backup-restore server")
	fs.StringVar(&b.serverKey, "server-key", "", "TLS key file for backup-restore server")
	fs.BoolVar(&b.profiling, "enable-profiling", false, "enable profiling")
	fs.StringVar(&b.configFile, "config-file", "", "path to the configuration file")
	b.logLevel.flag(fs)
	fs.BoolVar(&b.useEtcdWrapper, "use-etcd-wrapper", false, "to enable backup-restore to use etcd-wrapper related functionality. Note: enable this flag only if etcd-wrapper is deployed.")
	b.leases.flags(fs)
}

// brDefragFlag is etcd-backup-restore's defragmentation schedule.
func brDefragFlag(fs *pflag.FlagSet, schedule *string) {
	fs.StringVar(schedule, "defragmentation-schedule", "0 0 */3 * *", "schedule to defragment etcd data directory")
}

// brLogLevel is etcd-backup-restore's --log-level: logrus's level (0
// panic … 6 trace). Only server has the flag; the other commands log at
// its default.
type brLogLevel uint32

func (l *brLogLevel) flag(fs *pflag.FlagSet) {
	fs.Uint32Var((*uint32)(l), "log-level", 4, "verbosity level of logs")
}

// logger logs at the level etcd-backup-restore's would.
func (l brLogLevel) logger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	switch {
	case l <= 2:
		level = slog.LevelError
	case l == 3:
		level = slog.LevelWarn
	case l >= 5:
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func serverCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "server [etcd-backup-restore's flags]",
		Short: "Run the backup sidecar in etcd-backup-restore's place, for etcd-druid",
		Long: `server takes etcd-backup-restore's "etcdbrctl server" flags and environment (STORAGE_CONTAINER,
POD_NAME, ETCD_CONF and the credential variables) and serves its HTTP protocol without
authentication on --server-port, with HTTPS when --server-cert and --server-key are given:
/initialization/start and /status, /config, /snapshot/full, /snapshot/delta,
/snapshot/latest, /healthz and /metrics (etcdbr_* beside etcdkit_*). Serve it only where the
pod network alone reaches it. With --enable-member-lease-renewal and
--enable-snapshot-lease-renewal it renews the Kubernetes leases etcd-druid made, in
POD_NAMESPACE, on the API server of the pod's service account (or $KUBECONFIG).
ETCDKIT_LOCK_FOR and ETCDKIT_LOCK_MODE lock each object it writes (--lock-for, --lock-mode).
"server --help" lists the flags; those that mean nothing to etcdkit are accepted and
logged as ignored.`,
		// The flags are etcd-backup-restore's, some of them named like
		// etcd-backup's own with another meaning: they are parsed here,
		// apart from the root's.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var b brServer
			fs, err := parseBRFlags(cmd, "server", args, b.flags)
			if fs == nil {
				return err
			}
			return b.run(cmd, g, fs)
		},
	}
}

func (b *brServer) run(cmd *cobra.Command, g *globals, fs *pflag.FlagSet) error {
	ctx := cmd.Context()
	log := b.logLevel.logger(g.progress)
	logIgnored(fs, "server", log)
	if b.configFile != "" {
		return cli.Usage(errors.New("--config-file: etcd-backup server takes etcd-backup-restore's flags, not its configuration file; pass the file's settings as flags"))
	}
	if err := errors.Join(b.bandwidth.Check(), cli.Durations{{"full-splay", b.fullSplay, true}}.Check()); err != nil {
		return err
	}
	g.limits = b.bandwidth.Limits()
	st, storeURL, err := b.openStores(ctx, g, log)
	if err != nil {
		return err
	}
	second, err := b.openSecondary(ctx, g, log, st, storeURL)
	if err != nil {
		return err
	}
	snaps, err := b.snapshotting("server", log)
	if err != nil {
		return err
	}
	snaps.FullSplay = b.fullSplay
	secondRetention, secondKeepsAll, err := siteRetention("secondary-retention", b.secondaryRetention)
	if err != nil {
		return err
	}
	if second == nil && b.secondaryRetention != "same" {
		return cli.Usage(errors.New("--secondary-retention needs --secondary-backup-sync-enabled: it is the second site's"))
	}
	conn, err := b.conn(log, b.store.tempDir)
	if err != nil {
		return err
	}
	conf, pod, err := b.etcdConf(b.endpoints[0])
	if err != nil {
		return cli.Usage(err)
	}
	if err := os.MkdirAll(b.store.tempDir, 0o700); err != nil {
		return fmt.Errorf("--snapstore-temp-directory: %w", err)
	}
	etcd, err := etcdclient.New(ctx, conn)
	if err != nil {
		return err
	}
	defer func() { _ = etcd.Close() }()
	o := sidecar.Options{
		Client: etcd, Endpoint: b.endpoints[0], WorkDir: b.store.tempDir, Logger: log,
		Backups: sidecar.BackupOptions{
			Store: st, Snapshots: snaps, Secondary: second, SecondaryPeriod: b.syncPeriod,
			SecondaryRetention: secondRetention, SecondaryKeepsAll: secondKeepsAll,
			// As serve's default: /readyz and etcdkit_store_write_once say
			// whether the bucket's lock is really on.
			WriteOncePeriod: time.Hour,
		},
		Defrag:      sidecar.DefragOptions{Schedule: b.defragSchedule, Options: defrag.Options{Timeout: b.defragTimeout}},
		API:         sidecar.APIOptions{PeerTLS: tlsfiles.Files{CA: b.cacert, Names: tlsfiles.Names{CA: "--cacert"}}},
		Membership:  sidecar.MembershipOptions{Conn: conn},
		OnOperation: b.leases.onOperation,
	}
	// etcd-backup-restore has no such flag: the variable turns on the
	// EtcdMember's status.
	b.leases.memberStatus = os.Getenv(cli.EnvName("etcd-member-status")) == "true"
	c := etcdbr.Config{
		EtcdConf: conf, Pod: pod, DataDir: b.dataDir, StorePrefix: b.store.prefix, Port: int(b.port),
		// Flag defaults are no configuration: a live member's peer URLs
		// change only when the etcd config or the flag names them.
		CorrectPeerURLs: conf.File() || fs.Changed("initial-advertise-peer-urls"),
		TLS:             b.serverCert != "", ServiceEndpoints: b.serviceEndpoints, UseEtcdWrapper: b.useEtcdWrapper, WorkDir: b.store.tempDir,
		Startup: startup.Options{Conn: conn, KeepMovedAside: 1, Logger: log}, Logger: log,
	}
	srv, err := etcdbr.New(o, c)
	if err != nil {
		return cli.Usage(err)
	}
	// etcd-druid makes the leases; its Role lets the pods update them, not
	// create them.
	hb, err := b.leases.heartbeat(srv.Sidecar().Registry(), srv.MemberName(), o.Backups.Snapshots.DeltaPeriod, false, log)
	if err != nil {
		return err
	}
	so, err := b.serveOptions(log, storeURL)
	if err != nil {
		return err
	}
	err = withHeartbeat(ctx, hb, srv.Sidecar(), func(ctx context.Context) error { return srv.Serve(ctx, so) })
	log.Info("etcd-backup server: stopped")
	return err
}

// snapshotting is the Snapshotter's options etcd-backup-restore's
// flags mean (etcdbr.Snapshotting).
func (b *brSnapshots) snapshotting(command string, log *slog.Logger) (capture.Options, error) {
	snaps, note, err := etcdbr.Snapshotting{Schedule: b.schedule, DeltaPeriod: b.deltaPeriod, DeltaMemoryLimit: int64(b.deltaMemory),
		GCPeriod: b.gcPeriod, GCPolicy: b.gcPolicy, MaxBackups: int(b.maxBackups), DeltaRetention: b.deltaRetention,
		Compress: b.compress, Compression: b.compression}.Options()
	if err != nil {
		return capture.Options{}, cli.Usage(err)
	}
	if note != "" {
		log.Warn("etcd-backup "+command+": "+note, "compression-policy", b.compression)
	}
	return snaps, nil
}

// serveOptions are the protocol server's: its address and TLS.
func (b *brServer) serveOptions(log *slog.Logger, storeURL string) (sidecar.ServeOptions, error) {
	// etcd-backup-restore listens on every interface; ETCDKIT_LISTEN
	// (serve's --listen) narrows it, where sidecars share a host.
	listen := cmp.Or(os.Getenv(cli.EnvName("listen")), fmt.Sprintf(":%d", b.port))
	so := sidecar.ServeOptions{Listen: listen, Profiling: b.profiling, OnListening: func(addr string) {
		log.Info("etcd-backup server: serving etcd-backup-restore's protocol", "listen", addr, "member", b.endpoints[0], "store", storeURL,
			"tls", b.serverCert != "")
	}}
	if b.serverCert != "" || b.serverKey != "" {
		files := tlsfiles.Files{Cert: b.serverCert, Key: b.serverKey, Names: tlsfiles.Names{Cert: "--server-cert", Key: "--server-key"}}
		var err error
		if so.TLS, err = files.NewServer(log); err != nil {
			return so, cli.Usage(err)
		}
	}
	return so, nil
}

// openStores opens the store the flags name, none without
// --storage-provider: the sidecar then only initializes, defragments and
// serves its protocol.
func (b *brServer) openStores(ctx context.Context, g *globals, log *slog.Logger) (store.Store, string, error) {
	st, storeURL, err := b.store.open(ctx, g, log)
	if err == nil && st == nil {
		log.Warn("etcd-backup server: no --storage-provider: no backups; the sidecar initializes, defragments and serves its protocol")
	}
	return st, storeURL, err
}

// open opens the store the flags name, and says its URL; none without
// --storage-provider.
func (b *brStore) open(ctx context.Context, g *globals, log *slog.Logger) (store.Store, string, error) {
	storeURL, err := b.url("STORAGE_CONTAINER")
	if err != nil || storeURL == "" {
		return nil, "", cli.Usage(err)
	}
	// etcd-backup-restore has no per-object lock: ETCDKIT_LOCK_FOR and
	// ETCDKIT_LOCK_MODE give one.
	if storeURL, err = g.lock.URL(storeURL); err != nil {
		return nil, "", err
	}
	st, err := cli.OpenStore(ctx, storeURL, g.storeTimeout, log)
	return g.limited(st), storeURL, err
}

// require is open for a command that has nothing to do without a store:
// what says what it is for.
func (b *brStore) require(ctx context.Context, g *globals, log *slog.Logger, what string) (store.Store, string, error) {
	st, storeURL, err := b.open(ctx, g, log)
	if err == nil && st == nil {
		err = cli.Usage(fmt.Errorf("--storage-provider is empty: name the store to %s", what))
	}
	return st, storeURL, err
}

// openSecondary opens the second site when the flags sync one; one that
// does not answer now is copied to later: it must not keep the sidecar
// from starting.
func (b *brServer) openSecondary(ctx context.Context, g *globals, log *slog.Logger, st store.Store, storeURL string) (store.Store, error) {
	if !b.syncSecondary {
		return nil, nil
	}
	secondURL, err := b.secondary.urlFor("SECONDARY_STORAGE_CONTAINER", "SECONDARY_")
	switch {
	case err != nil:
		return nil, cli.Usage(fmt.Errorf("the second site: %w", err))
	case secondURL == "":
		return nil, cli.Usage(errors.New("--secondary-backup-sync-enabled needs --secondary-storage-provider"))
	case st == nil:
		return nil, cli.Usage(errors.New("--secondary-backup-sync-enabled needs --storage-provider: the second site copies the first"))
	case secondURL == storeURL:
		return nil, cli.Usage(errors.New("--secondary-backup-sync-enabled: the second site is the first store; name another"))
	}
	second, err := cli.OpenSite(ctx, secondURL, g.storeTimeout, log)
	if err != nil {
		return nil, fmt.Errorf("the second site: %w", err)
	}
	return g.limited(second), nil
}

// conn is the connection to etcd the flags describe; a password given on
// the command line is kept in a file in tempDir.
func (b *brConn) conn(log *slog.Logger, tempDir string) (etcdclient.Config, error) {
	if len(b.endpoints) == 0 {
		return etcdclient.Config{}, cli.Usage(errors.New("--endpoints is empty: give this member's client URL"))
	}
	c := etcdclient.Config{Endpoints: b.endpoints, DialTimeout: b.connTimeout, AllowUnreachable: true, RequireRoot: true, Logger: log}
	if !b.insecureTransport {
		c.TLS = tlsfiles.Files{CA: b.cacert, Cert: b.cert, Key: b.key, InsecureSkipVerify: b.insecureSkipVerify,
			Names: tlsfiles.Names{CA: "--cacert", Cert: "--cert", Key: "--key"}}
	}
	if b.username != "" {
		// etcd-backup-restore takes the password on the command line;
		// the client reads it from a file, kept private to this process.
		f, err := os.CreateTemp(tempDir, "etcd-password-")
		if err != nil {
			return c, fmt.Errorf("--etcd-password: %w", err)
		}
		defer func() { _ = f.Close() }()
		if _, err := f.WriteString(b.password); err != nil {
			return c, fmt.Errorf("--etcd-password: %w", err)
		}
		c.User, c.PasswordFile = b.username, f.Name()
		log.Warn("etcd-backup: --etcd-password is on the command line, where ps shows it")
	}
	return c, nil
}

// etcdConf is the members' configuration: ETCD_CONF's file as etcd-druid
// mounts it, or, when there is none, one member described by the flags,
// serving clients at endpoint.
func (b *brMember) etcdConf(endpoint string) (*etcdbr.EtcdConf, string, error) {
	path := os.Getenv("ETCD_CONF")
	if path == "" {
		path = etcdbr.DefaultEtcdConf
	}
	if _, err := os.Stat(path); err == nil || os.Getenv("ETCD_CONF") != "" {
		conf, err := etcdbr.LoadEtcdConf(path)
		return conf, os.Getenv("POD_NAME"), err
	}
	raw := map[string]any{
		"name": b.name, "data-dir": b.dataDir, "initial-cluster": b.initialCluster, "initial-cluster-token": b.token,
		"initial-advertise-peer-urls": strings.Join(b.peerURLs, ","), "advertise-client-urls": endpoint,
	}
	conf, err := etcdbr.EtcdConfOf("the command line (no "+etcdbr.DefaultEtcdConf+", no ETCD_CONF)", raw)
	return conf, b.name, err
}
