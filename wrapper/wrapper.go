package wrapper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/validate"
)

// CleanShutdownMarker is the file a stopped wrapper leaves in the data
// dir. Its presence lets the next start trust a sanity check; without it
// (a crash) the data dir gets the full one.
const CleanShutdownMarker = "etcdkit-clean-shutdown"

// Options configures Run. Config is required; the zero value of the rest
// prepares the data dir itself with no store, no sidecar and no peers.
type Options struct {
	// Config is etcd's configuration, from LoadConfig (or a File's, read
	// for the Runner's release).
	Config *embed.Config
	// Runner runs etcd: Embedded, this module's etcd in this process (the
	// default), or a Process of the operator's release. The data dir is
	// judged, restored and joined for its release.
	Runner Runner
	// Preparer says who checks the data dir and restores it before etcd
	// starts: a *startup.Local in this process (the default, with no
	// store: give it one to restore from), a startup.Remote for the
	// sidecar's API, a startup.EtcdBR for a sidecar that speaks
	// etcd-backup-restore's protocol. Membership is decided and changed
	// here whichever it is.
	Preparer startup.Preparer
	// Endpoints reach the other members' client URLs, to ask the cluster
	// before joining it.
	Endpoints []string
	// Conn is how the wrapper reaches its own member and the others (TLS,
	// authentication, timeouts); its endpoints are ignored. nil:
	// ClientConn(Config), what etcd's own configuration says.
	Conn *etcdclient.Config
	// WipeOnCorrupt lets a corrupt member of a multi-member cluster move
	// its data dir aside and rejoin when there is no store: its peers hold
	// the data. Without it, and without a store, Corrupt refuses to start.
	WipeOnCorrupt bool
	// JoinTimeout bounds the wait for the first member to restore a
	// cluster this one then joins. Default 5 min.
	JoinTimeout time.Duration
	// KeepMovedAside is how many moved-aside data dirs (a restore's, a
	// rejoin's) are kept, the newest. Default 1; negative keeps them all.
	KeepMovedAside int
	// Listen is the address of /livez, /readyz and /healthz; "": none.
	Listen string
	// ListenTLS, when set, serves them over HTTPS (etcd-druid's readiness
	// probe asks HTTPS where the member's client port is TLS).
	ListenTLS *tls.Config
	// OnPlan, when set, is called with the start-up's plan once it is
	// carried out, before etcd starts.
	OnPlan func(startup.Plan)
	// OnReady, when set, is called once etcd serves.
	OnReady func(Etcd)
	// Logger: nil discards.
	Logger *slog.Logger
}

func (o *Options) defaults() error {
	if o.Config == nil {
		return errors.New("wrapper: no etcd configuration")
	}
	if o.JoinTimeout <= 0 {
		o.JoinTimeout = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Runner == nil {
		o.Runner = Embedded{}
	}
	if o.Preparer == nil {
		o.Preparer = &startup.Local{KeepMovedAside: o.KeepMovedAside, Logger: o.Logger}
	}
	conn := ClientConn(o.Config)
	if o.Conn != nil {
		conn = *o.Conn
	}
	conn.Logger = o.Logger
	o.Conn = &conn
	return nil
}

// Run prepares the data dir for the Runner's release, starts etcd and
// serves until ctx ends, then stops etcd, leaves the clean-shutdown marker
// and the guard, and returns nil. It returns an error when the member must
// not start, or when etcd stops by itself. A refusal that holds (the
// cluster removed the member on purpose) is not returned until ctx ends:
// the probes say why meanwhile, and a restart would change nothing.
func Run(ctx context.Context, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	cfg := o.Config
	log := o.Logger.With("member", cfg.Name)
	h := &health{}
	stopHealth, err := h.serve(o.Listen, o.ListenTLS)
	if err != nil {
		return err
	}
	defer stopHealth()
	release, err := o.Runner.Release(ctx)
	if err != nil {
		return fmt.Errorf("wrapper: %w", err)
	}
	p, err := prepare(ctx, o, release, h, log)
	if err != nil {
		if r := (*startup.Refusal)(nil); errors.As(err, &r) && r.Plan.Hold {
			return hold(ctx, h, r, log)
		}
		return err
	}
	if o.OnPlan != nil {
		o.OnPlan(p)
	}
	if p.InitialCluster != "" {
		cfg.InitialCluster = p.InitialCluster
	}
	if p.ClusterState != "" {
		cfg.ClusterState = p.ClusterState
	}
	marker := filepath.Join(cfg.Dir, CleanShutdownMarker)
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wrapper: %w", err)
	}
	log.Info("wrapper: starting etcd", "etcd", release, "action", p.Action, "initial_cluster", cfg.InitialCluster, "state", cfg.ClusterState)
	e, err := o.Runner.Start(ctx, cfg, *o.Conn)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("wrapper: %w", err)
	}
	if err := validate.WriteGuard(cfg.Dir, cfg.Name, cfg.InitialClusterToken); err != nil {
		_ = e.Stop()
		return fmt.Errorf("wrapper: %w", err)
	}
	learner, _ := e.Learner(ctx)
	log.Info("wrapper: etcd serves", "etcd", release, "learner", learner)
	h.started(e)
	if p.Learner || learner {
		go promote(ctx, o, e, log)
	}
	if o.OnReady != nil {
		o.OnReady(e)
	}
	select {
	case <-ctx.Done():
		h.running.Store(false)
		if err := e.Stop(); err != nil {
			return fmt.Errorf("wrapper: %w", err)
		}
		if err := os.WriteFile(marker, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
			return fmt.Errorf("wrapper: clean-shutdown marker: %w", err)
		}
		if err := validate.WriteGuard(cfg.Dir, cfg.Name, cfg.InitialClusterToken); err != nil {
			return fmt.Errorf("wrapper: %w", err)
		}
		log.Info("wrapper: etcd stopped cleanly")
		return nil
	case <-e.Done():
		h.running.Store(false)
		_ = e.Stop()
		return fmt.Errorf("wrapper: %w", e.Err())
	}
}

// hold keeps a member that must stay out from starting, and from exiting
// into a restart loop: the probes answer why until ctx ends, and then the
// refusal is returned.
func hold(ctx context.Context, h *health, r *startup.Refusal, log *slog.Logger) error {
	log.Error("wrapper: refusing to start; holding until stopped, since a restart changes nothing", "reason", r.Plan.Reason)
	h.refuse(r.Plan.Reason)
	<-ctx.Done()
	return r
}

// prepare runs the start-up for release with the source the division
// gives.
func prepare(ctx context.Context, o Options, release etcdversion.Version, h *health, log *slog.Logger) (startup.Plan, error) {
	cfg := o.Config
	_, err := os.Stat(filepath.Join(cfg.Dir, CleanShutdownMarker))
	scfg := startup.Config{Member: member.Spec{Name: cfg.Name, DataDir: cfg.Dir, WALDir: cfg.WalDir, PeerURLs: urls(cfg.AdvertisePeerUrls), InitialCluster: cfg.InitialCluster, Token: cfg.InitialClusterToken}, ClientURLs: urls(cfg.AdvertiseClientUrls), ClusterState: cfg.ClusterState, Endpoints: o.Endpoints, CleanShutdown: err == nil, Etcd: release}
	if _, err := types.NewURLsMap(cfg.InitialCluster); err != nil {
		return startup.Plan{}, fmt.Errorf("wrapper: initial-cluster: %w", err)
	}
	p, err := startup.Prepare(ctx, scfg, o.Preparer, startup.Options{Conn: *o.Conn, PeerTLS: PeerFiles(cfg), WipeOnCorrupt: o.WipeOnCorrupt,
		JoinTimeout: o.JoinTimeout, KeepMovedAside: o.KeepMovedAside, OnWait: h.wait, Logger: log})
	if err != nil {
		return p, fmt.Errorf("wrapper: %w", err)
	}
	return p, nil
}

// promote promotes this learner once it has caught up.
func promote(ctx context.Context, o Options, e Etcd, log *slog.Logger) {
	// A learner answers neither a promotion nor a login: ask the others,
	// this member only when there are none to ask.
	eps := o.Endpoints
	if len(eps) == 0 {
		eps = urls(o.Config.AdvertiseClientUrls)
	}
	id := e.ID()
	if err := startup.Promote(ctx, *o.Conn, eps, id, member.RetryOptions{Deadline: 10 * time.Minute, Logger: o.Logger}); err != nil {
		log.Error("wrapper: promote", "error", err)
		return
	}
	log.Info("wrapper: promoted from learner to voting member")
}

// ClientConn is how a member configured by cfg is reached as a client,
// from etcd's own configuration: its client-transport-security's CA
// bundle, and the certificate etcd presents as a client (client-cert-file,
// else cert-file). auto-tls certificates are self-signed: they are not
// verified, and a warning says so.
func ClientConn(cfg *embed.Config) etcdclient.Config {
	info := cfg.ClientTLSInfo
	f := tlsfiles.Files{CA: info.TrustedCAFile, Cert: info.CertFile, Key: info.KeyFile, InsecureSkipVerify: cfg.ClientAutoTLS,
		Names: tlsfiles.Names{CA: "client-transport-security: trusted-ca-file", Cert: "client-transport-security: cert-file", Key: "client-transport-security: key-file"}}
	if info.ClientCertFile != "" {
		f.Cert, f.Key = info.ClientCertFile, info.ClientKeyFile
		f.Names.Cert, f.Names.Key = "client-transport-security: client-cert-file", "client-transport-security: client-key-file"
	}
	return etcdclient.Config{TLS: f}
}

// PeerFiles are the TLS files a member configured by cfg presents to its
// peers (peer-transport-security), with which its start-up asks the
// other members' peer URLs what they hold.
func PeerFiles(cfg *embed.Config) tlsfiles.Files {
	info := cfg.PeerTLSInfo
	return tlsfiles.Files{CA: info.TrustedCAFile, Cert: info.CertFile, Key: info.KeyFile, InsecureSkipVerify: cfg.PeerAutoTLS,
		Names: tlsfiles.Names{CA: "peer-transport-security: trusted-ca-file", Cert: "peer-transport-security: cert-file", Key: "peer-transport-security: key-file"}}
}

func urls(us []url.URL) []string {
	out := make([]string, 0, len(us))
	for _, u := range us {
		out = append(out, u.String())
	}
	return out
}
