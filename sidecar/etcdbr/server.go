package etcdbr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr/etcdbrapi"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// Config configures the protocol over a sidecar. EtcdConf and Pod are
// required.
type Config struct {
	// EtcdConf is etcd-druid's configuration of the members.
	EtcdConf *EtcdConf
	// Pod is this member's pod (POD_NAME): with the configuration's
	// member-name-prefix, the member's name.
	Pod string
	// DataDir is this member's data dir (--data-dir). Default the
	// configuration's data-dir.
	DataDir string
	// StorePrefix is the store's prefix (--store-prefix), shown in listed
	// snapshots as etcd-backup-restore shows it.
	StorePrefix string
	// Port is the port every member's sidecar serves on (--server-port):
	// a follower forwards snapshot calls to the leader's client host at
	// this port. Default 8080.
	Port int
	// TLS says the sidecars serve HTTPS: a follower calls the leader's
	// over https, trusting the sidecar's PeerTLS.
	TLS bool
	// ServiceEndpoints are asked about the cluster besides the members'
	// client URLs (--service-endpoints).
	ServiceEndpoints []string
	// Startup configures the start-up procedure /initialization/start
	// runs. Its Conn (TLS, credentials) also asks the cluster for
	// /config.
	Startup startup.Options
	// CorrectPeerURLs: once the member runs, its peer URLs in the cluster
	// are set to EtcdConf's when they differ. Only configuration that
	// names them says so (etcd-druid's file, or the flag given): defaults
	// would rewrite a live member's to http://localhost:2380.
	CorrectPeerURLs bool
	// UseEtcdWrapper: after the member's peer URLs were corrected in the
	// cluster, ask the etcd-wrapper beside it (port 9095) to restart etcd
	// with them, as etcd-backup-restore does with --use-etcd-wrapper.
	UseEtcdWrapper bool
	// WorkDir holds the database /upgrade/check streams from the member
	// while it reads its membership. Default the system's temporary dir.
	WorkDir string
	// Logger: nil discards.
	Logger *slog.Logger
}

// initial-cluster-state's values.
const (
	clusterNew      = "new"
	clusterExisting = "existing"
)

// Server serves etcd-backup-restore's protocol over a Sidecar.
type Server struct {
	sc  *sidecar.Sidecar
	cli *clientv3.Client
	// endpoint is the member's own client URL.
	endpoint string
	st       store.Store
	cfg      Config
	self     Member
	m        *metrics
	log      *slog.Logger
	// conn is how the cluster is asked for /config.
	conn func(ctx context.Context, endpoints []string) (*clientv3.Client, error)

	// upgrading is held while /upgrade/check runs.
	upgrading sync.Mutex

	mu sync.Mutex
	// ctx is Serve's: an initialization outlives its request, not the
	// server. nil until Serve.
	ctx    context.Context
	state  string
	plan   *startup.Plan
	deltas []snapshot.Snapshot // the latest chain's, as this sidecar wrote them
}

// New builds the sidecar from o and the protocol over it.
func New(o sidecar.Options, c Config) (*Server, error) {
	if c.EtcdConf == nil {
		return nil, errors.New("etcdbr: the members' etcd configuration is required")
	}
	self, err := c.EtcdConf.Member(c.Pod)
	if err != nil {
		return nil, fmt.Errorf("etcdbr: %w", err)
	}
	if c.DataDir == "" {
		c.DataDir = c.EtcdConf.DataDir
	}
	if c.DataDir == "" {
		return nil, errors.New("etcdbr: the data dir is not set (--data-dir, or data-dir in the etcd config)")
	}
	if c.Port == 0 {
		c.Port = 8080
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Startup.Logger == nil {
		c.Startup.Logger = c.Logger
	}
	if c.Startup.PeerTLS.IsZero() {
		c.Startup.PeerTLS = c.EtcdConf.PeerTLS
	}
	s := &Server{cli: o.Client, endpoint: o.Endpoint, st: o.Backups.Store, cfg: c, self: self, log: c.Logger, state: etcdbrapi.StateNew}
	s.conn = func(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
		conn := c.Startup.Conn.With(endpoints...)
		conn.DialTimeout = 5 * time.Second
		return etcdclient.New(ctx, conn)
	}
	o.API.PeerOf = s.peerOf
	if o.Membership.PromoteVia == nil {
		// The sidecar's own client reaches its member only.
		o.Membership.PromoteVia = s.endpoints()
	}
	onOp := o.OnOperation
	o.OnOperation = func(op sidecar.Operation) {
		s.m.operation(op)
		if onOp != nil {
			onOp(op)
		}
	}
	onResult := o.Backups.Snapshots.OnResult
	o.Backups.Snapshots.OnResult = func(r capture.Result) {
		s.result(r)
		if onResult != nil {
			onResult(r)
		}
	}
	if s.sc, err = sidecar.New(o); err != nil {
		return nil, err
	}
	s.m = newMetrics(s.sc.Registry())
	s.m.clusterSize.WithLabelValues().Set(float64(ClusterSize(c.EtcdConf.InitialCluster)))
	return s, nil
}

// Sidecar is the sidecar the protocol drives.
func (s *Server) Sidecar() *sidecar.Sidecar { return s.sc }

// MemberName is this member's name: the pod's, with the configuration's
// member-name-prefix. etcd-druid names the member's lease so.
func (s *Server) MemberName() string { return s.self.Name }

// Serve serves the protocol with o (its Listen, TLS and drain) and runs
// the sidecar until ctx ends, as sidecar.Serve does.
func (s *Server) Serve(ctx context.Context, o sidecar.ServeOptions) error {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	o.Handler = s.Handler()
	if s.cfg.CorrectPeerURLs {
		go s.checkPeerURLs(ctx)
	}
	return s.sc.Serve(ctx, o)
}

// Handler serves the protocol. Like etcd-backup-restore's, it takes any
// method on every path and asks for no credential.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	secured := func(path string, h http.HandlerFunc) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if s.cfg.TLS {
				w.Header().Set("Strict-Transport-Security", "max-age=31536000")
				w.Header().Set("Content-Security-Policy", "default-src 'self'")
			}
			h(w, r)
		})
	}
	secured("/initialization/start", s.startInitialization)
	secured("/initialization/status", s.initializationStatus)
	secured("/snapshot/full", s.uploaderOnly(s.fullSnapshot))
	secured("/snapshot/delta", s.uploaderOnly(s.deltaSnapshot))
	secured("/snapshot/latest", s.uploaderOnly(s.latestSnapshots))
	secured("/healthz", s.healthz)
	secured("/upgrade/check", s.upgradeCheck)
	mux.HandleFunc("/config", s.config)
	mux.Handle("/metrics", promhttp.HandlerFor(s.sc.Registry(), promhttp.HandlerOpts{}))
	return mux
}

// peerOf is the sidecar beside a member, as etcd-backup-restore finds
// the backup leader's: the member's first client URL's host, at the
// sidecars' port.
func (s *Server) peerOf(_ string, clientURLs []string) string {
	if len(clientURLs) == 0 {
		return ""
	}
	u, err := url.Parse(clientURLs[0])
	if err != nil || u.Hostname() == "" {
		return ""
	}
	scheme := "http"
	if s.cfg.TLS {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(u.Hostname(), fmt.Sprint(s.cfg.Port)))
}

// startupConfig is the member as the start-up procedure sees it.
func (s *Server) startupConfig(sanity bool) startup.Config {
	conf := s.cfg.EtcdConf
	return startup.Config{Member: member.Spec{Name: s.self.Name, DataDir: s.cfg.DataDir, WALDir: conf.WALDir, PeerURLs: s.self.PeerURLs, InitialCluster: conf.InitialCluster, Token: conf.Token}, ClientURLs: s.self.ClientURLs, ClusterState: conf.State, Endpoints: s.endpoints(), CleanShutdown: sanity}
}

// endpoints reach the other members: their advertised client URLs and the
// service's.
func (s *Server) endpoints() []string {
	eps := s.cfg.EtcdConf.OtherClientURLs(s.self.Name)
	for _, e := range s.cfg.ServiceEndpoints {
		if !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	return eps
}

// result follows the Snapshotter into the metrics.
func (s *Server) result(r capture.Result) {
	s.m.result(r)
	if r.Err != nil {
		return
	}
	s.mu.Lock()
	switch r.Op {
	case capture.OpFull:
		s.deltas = nil
	case capture.OpDelta:
		s.deltas = append(s.deltas, r.Snapshot)
	default:
		s.mu.Unlock()
		return
	}
	c := snapshot.Chain{Deltas: s.deltas}
	s.mu.Unlock()
	s.m.chain(c)
}

// checkPeerURLs corrects the member's peer URLs in the cluster once it
// runs, when they differ from the configuration's, and asks the wrapper
// to restart etcd so that it listens on them.
func (s *Server) checkPeerURLs(ctx context.Context) {
	var self member.Self
	for {
		var err error
		if self, err = s.sc.Member(); err == nil && self.ID != 0 {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := s.cli.MemberList(lctx)
	if err != nil {
		s.log.Warn("etcdbr: check the member's peer URLs", "error", err)
		return
	}
	for _, m := range list.Members {
		if m.ID != self.ID || sameURLs(m.PeerURLs, s.self.PeerURLs) {
			continue
		}
		s.log.Info("etcdbr: the member's peer URLs changed; updating them", "from", m.PeerURLs, "to", s.self.PeerURLs)
		if err := member.UpdatePeerURLs(ctx, s.cli, m.ID, s.self.PeerURLs, s.cfg.Startup.Retry); err != nil {
			s.log.Error("etcdbr: update the member's peer URLs", "error", err)
			return
		}
		if s.cfg.UseEtcdWrapper {
			s.restartWrapper(ctx)
		}
	}
}

func sameURLs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// restartWrapper asks the etcd-wrapper beside the member to stop etcd
// (POST /stop on its port 9095): the container restarts with the new peer
// URLs.
func (s *Server) restartWrapper(ctx context.Context) {
	u, err := url.Parse(s.endpoint)
	if err != nil {
		s.log.Error("etcdbr: restart the etcd-wrapper", "error", err)
		return
	}
	target := fmt.Sprintf("%s://%s/stop", u.Scheme, net.JoinHostPort(u.Hostname(), "9095"))
	files := tlsfiles.Files{CA: s.cfg.Startup.Conn.TLS.CA}
	cl, err := files.NewClient(s.log)
	if err != nil {
		s.log.Error("etcdbr: restart the etcd-wrapper", "error", err)
		return
	}
	hc := &http.Client{Transport: cl.Transport(10 * time.Second), Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return
	}
	resp, err := hc.Do(req)
	if err != nil {
		s.log.Error("etcdbr: restart the etcd-wrapper", "url", target, "error", err)
		return
	}
	_ = resp.Body.Close()
	s.log.Info("etcdbr: asked the etcd-wrapper to restart etcd", "url", target, "status", resp.StatusCode)
}
