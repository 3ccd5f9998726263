package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/robfig/cron/v3"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/compact"
	"github.com/etcdkit/etcdkit/defrag"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/internal/scratch"
	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tlsfiles"
	"github.com/etcdkit/etcdkit/validate"
)

// ErrNotUploader fences an upload: this sidecar's member no longer leads.
var ErrNotUploader = errors.New("this sidecar is not the uploader: its member does not lead")

// ErrNoStore is a call for backups to a sidecar that has no store.
var ErrNoStore = errors.New("this sidecar has no store: it takes no backups")

// Options configures a Sidecar. Client is required, and Endpoint but for
// a sidecar outside the cluster; the rest is grouped by duty: the
// backups, defragmentation, the API, the membership of the sidecar's own
// member, and a warm standby.
type Options struct {
	// Client reaches the cluster; Endpoint is this sidecar's own member's
	// client URL. "" with Backups.FromOutside: the sidecar has no member
	// of its own and follows the cluster at Client's endpoints, whichever
	// member leads (member.AskLeader).
	Client   *clientv3.Client
	Endpoint string
	// Backups are what the uploader does while its member leads.
	Backups BackupOptions
	// Defrag is the uploader's defragmentation of the cluster.
	Defrag DefragOptions
	// API is what the HTTP API's calls may do, and where followers
	// forward them.
	API APIOptions
	// Membership is how the sidecar follows and promotes its member.
	Membership MembershipOptions
	// Standby, when set (its Restore.Member.DataDir), keeps a warm standby
	// of the store's newest state (restore.Follow) whichever member
	// leads; when Run ends its state becomes a data dir there. Its Codec
	// and Logger default to the Snapshotter's and the sidecar's.
	Standby *restore.FollowOptions
	// WorkDir holds spooled snapshots, chains being compacted and
	// restores being built; New creates it (0700) when missing. Default
	// os.TempDir().
	WorkDir string
	// OnOperation, when set, is told of every restore, validation,
	// membership change, defragmentation and compaction the sidecar ran,
	// for metrics of the caller's own.
	OnOperation func(Operation)
	// Registry receives the metrics. Default a new registry, which also
	// carries the Go runtime's and the process's.
	Registry *prometheus.Registry
	// Logger: nil discards.
	Logger *slog.Logger
}

// BackupOptions are the uploader's duties: snapshots, the second site,
// chain compaction, restore drills and the store's write-once probe.
type BackupOptions struct {
	// Store holds the backups. nil: none; the sidecar takes no snapshots
	// and still defragments, promotes and serves its API (etcd-druid runs
	// clusters without backups, with the sidecar beside them all the
	// same).
	Store store.Store
	// Snapshots configures the Snapshotter the uploader runs. Its
	// BeforeUpload and OnResult, when set, run after the sidecar's own.
	Snapshots capture.Options
	// FromOutside: the sidecar backs up the cluster from outside it, one
	// process for the whole cluster (etcd-backup-restore's snapshot
	// command, a Deployment beside a kubeadm or external etcd), not beside
	// a member: it uploads while the member at Endpoint answers, leader or
	// not, or with Endpoint "" while a member of Client's endpoints names
	// a leader, whichever member that is; and it leaves the members'
	// membership alone (no promotion, no removal watch). A second one on
	// the same prefix is stopped by the uploader records
	// (snapshot.ErrNewerUploader).
	FromOutside bool
	// Secondary, when set with Store, is a second site: the uploader
	// copies to it what it lacks of Store after each snapshot written and
	// every SecondaryPeriod (default 1 h), and applies the Snapshots'
	// retention there. Its lag is a metric and part of /readyz; a second
	// site that fails never stops the backups.
	Secondary       store.Store
	SecondaryPeriod time.Duration
	// SecondaryRetention is the second site's own retention (longer or
	// shorter than Store's), applied after each copy. nil: the
	// Snapshots' Retention, unless their RetentionPeriod is Off. The
	// first site's pins keep their chains on the second too.
	SecondaryRetention *snapshot.Retention
	// SecondaryKeepsAll: no retention on the second site; it keeps every
	// snapshot copied there.
	SecondaryKeepsAll bool
	// Bundle are files and directories (the kube-apiserver's
	// EncryptionConfiguration and keys, the cluster's PKI) written after
	// each full as a restore bundle (snapshot.WriteBundle), sealed to the
	// Snapshots' recipients, when they changed since the store's newest
	// bundle. Nothing of their contents is logged. None: no bundles.
	Bundle []string
	// CompactAfter: the uploader compacts the latest chain into a new
	// full snapshot once its deltas cover this many revisions. 0: never.
	CompactAfter int64
	// MaxRestoreTime: the uploader compacts the latest chain once its
	// estimated restore time on this node passes this. 0: no budget.
	MaxRestoreTime time.Duration
	// DrillPeriod: the uploader restores the latest chain in WorkDir this
	// often and compares it with the live cluster (RunDrill). 0: never.
	DrillPeriod time.Duration
	// MaxBackupAge: /readyz answers 503 once this sidecar uploads and its
	// backups have failed, or its Snapshotter has been stopped, for longer.
	// Default 10 min.
	MaxBackupAge time.Duration
	// WriteOncePeriod is how often the uploading sidecar asks the store
	// whether it refuses deletes (snapshot.ProbeProtection), shown in
	// /readyz and etcdkit_store_write_once. 0: never (etcd-backup serve's
	// --write-once-check-period defaults to 1 h).
	WriteOncePeriod time.Duration
	// RequireWriteOnce: /readyz answers 503 while the store's last answer
	// is that it deletes what it holds (no write-once lock).
	RequireWriteOnce bool
}

// DefragOptions are the uploader's defragmentation.
type DefragOptions struct {
	// Schedule is a cron expression for defragmentation by the uploader,
	// with Options (its policy skips members with little to reclaim, so a
	// frequent schedule acts on the threshold). "": never.
	Schedule string
	Options  defrag.Options
}

// APIOptions are what the API's calls may do.
type APIOptions struct {
	// RestoreRoot: restore requests may only build data dirs under it.
	// "": the API refuses restores.
	RestoreRoot string
	// KeepMovedAside is how many moved-aside data dirs a restore keeps
	// beside the one it builds. Default 1; negative keeps them all.
	KeepMovedAside int
	// Peers maps member names to their sidecars' base URLs, where a
	// follower forwards mutating calls.
	Peers map[string]string
	// PeerOf finds the sidecar of a member Peers does not name, from the
	// member's client URLs ("": none). nil: Peers only.
	PeerOf func(name string, clientURLs []string) string
	// PeerTLS is how this sidecar calls the others' APIs over https (the
	// CA bundle of their certificates, and this sidecar's client
	// certificate where they take client certificates). Read again when
	// the files change.
	PeerTLS tlsfiles.Files
}

// MembershipOptions are how the sidecar follows its member and promotes
// it.
type MembershipOptions struct {
	// Conn is how the members a restore request names (its endpoints),
	// and those a promotion is asked of, are reached: TLS and
	// authentication as for Client.
	Conn etcdclient.Config
	// Follow is how often the member is asked who leads.
	Follow member.FollowOptions
	// Promote bounds the promotion of this sidecar's member when it is a
	// learner.
	Promote member.RetryOptions
	// PromoteVia are other members' client URLs the promotion is asked
	// of, through Conn: a learner answers no promotion itself. Default:
	// Client's endpoints.
	PromoteVia []string
}

// Operation is one operation the sidecar ran: Name is "validation",
// "restore", "remove", "add-learner", "promote", "defrag", "compaction"
// or "drill".
type Operation struct {
	Name string
	Took time.Duration
	Err  error
	// Defrag is the defragmentation's result, member by member.
	Defrag defrag.Result
}

// Sidecar is one member's backup sidecar. Each of its duties keeps its
// own state: the uploader (the Snapshotter while the member leads), the
// latest chain and its compaction, the restore drills, the warm standby,
// the defragmentation schedule, the member's promotion and the API's
// restore jobs.
type Sidecar struct {
	opts     Options
	log      *slog.Logger
	snap     *capture.Snapshotter
	up       *uploader
	chain    *chainState
	drills   *drills
	defrag   cron.Schedule
	metrics  *metrics
	standby  *standbyMetrics
	registry *prometheus.Registry
	peers    *tlsfiles.Client
	peerHTTP *http.Client
	jobs     *jobs
	second   *secondary // nil: no second site
	// writeOnce asks whether the store refuses deletes; nil: never.
	writeOnce *writeOnce
	member    observed
	// removed is why the member's data dir stays out (validate.Removed),
	// as a start-up check last found it; "" when it does not.
	removed atomic.Pointer[string]
	// compactions asks Run's compaction loop for one (the chain passed
	// its threshold).
	compactions chan struct{}
	// bundles hands Run's bundle loop the newest full to write the
	// restore bundle beside (Backups.Bundle).
	bundles chan snapshot.Snapshot
}

// observed is what the member last said of itself, and whether its
// promotion runs.
type observed struct {
	mu        sync.Mutex
	self      member.Self
	err       error
	promoting bool
	// id is the member's ID as it last answered, and peers its peer URLs
	// as the cluster listed them; asked is when the cluster was last asked
	// whether it still lists it, and gone the ID the cluster was found to
	// have removed.
	id, gone uint64
	peers    []string
	asked    time.Time
}

// New checks the options and returns a Sidecar; Run starts it.
func New(o Options) (*Sidecar, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.WorkDir == "" {
		o.WorkDir = os.TempDir()
	}
	// A work dir on a fresh volume does not exist yet: the first snapshot
	// must not be what finds out.
	if err := os.MkdirAll(o.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("sidecar: work dir: %w", err)
	}
	// What a killed sidecar left there (spooled snapshots, compactions,
	// drills) goes; a live process's is locked and stays, and so does a
	// directory of another program that shares the prefix.
	scratch.SweepMade(o.WorkDir, "etcdkit-")
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Backups.MaxBackupAge <= 0 {
		o.Backups.MaxBackupAge = 10 * time.Minute
	}
	if o.Registry == nil {
		// A registry of its own also carries the process's: a
		// caller's may have them already.
		o.Registry = prometheus.NewRegistry()
		o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Sidecar{opts: o, log: o.Logger, registry: o.Registry, jobs: newJobs(), chain: &chainState{}, compactions: make(chan struct{}, 1),
		bundles: make(chan snapshot.Snapshot, 1)}
	var err error
	if s.peers, err = o.API.PeerTLS.NewClient(o.Logger); err != nil {
		return nil, fmt.Errorf("sidecar: the other sidecars' TLS: %w", err)
	}
	s.peerHTTP = &http.Client{Transport: s.peers.Transport(10 * time.Second)}
	if o.Defrag.Schedule != "" {
		sched, err := cron.ParseStandard(o.Defrag.Schedule)
		if err != nil {
			return nil, fmt.Errorf("sidecar: defrag schedule %q: %w", o.Defrag.Schedule, err)
		}
		s.defrag = sched
	}
	if o.Backups.Store != nil {
		if s.snap, err = capture.New(o.Client, o.Backups.Store, s.snapshotOptions()); err != nil {
			return nil, fmt.Errorf("sidecar: %w", err)
		}
	}
	s.metrics = newMetrics(o.Registry, func() float64 { return float64(s.SnapshotStatus().PendingEvents) })
	s.up = &uploader{snap: s.snap, log: o.Logger, metrics: s.metrics, why: "the member leads"}
	if s.leaderless() {
		s.up.why = "the member answers"
	}
	s.drills = &drills{}
	s.drills.m = newDrillMetrics(o.Registry, s.drills.verifiedAge, s.rpo)
	s.drills.m.budget.Set(o.Backups.MaxRestoreTime.Seconds())
	s.standby = newStandbyMetrics(o.Registry)
	if o.Backups.Secondary != nil {
		s.second = newSecondary(o, o.Registry, o.Logger)
	}
	if o.Backups.Store != nil && o.Backups.WriteOncePeriod > 0 {
		s.writeOnce = newWriteOnce(o.Backups.Store, o.Backups.WriteOncePeriod, o.Registry, o.Logger)
	}
	s.metrics.failures.WithLabelValues("drill")
	return s, nil
}

// check refuses options that cannot work together.
func (o Options) check() error {
	switch {
	case o.Client == nil:
		return errors.New("sidecar: a client is required")
	case o.Endpoint == "" && !o.Backups.FromOutside:
		return errors.New("sidecar: the member's endpoint is required, but for a sidecar outside the cluster (FromOutside)")
	case o.Standby != nil && o.Backups.Store == nil:
		return errors.New("sidecar: a warm standby needs a store to follow")
	case o.Backups.Snapshots.Source == snapshot.SourceEtcdAPI && (o.Defrag.Schedule != "" || o.Backups.DrillPeriod > 0):
		return errors.New("sidecar: a datastore behind etcd's API is not defragmented or drilled by the sidecar: it serves no Defragment, and a drill compares against etcd's own history; leave out the defrag schedule and the drill period")
	case o.Backups.Secondary != nil && o.Backups.Store == nil:
		return errors.New("sidecar: a second site needs a store to copy from")
	case len(o.Backups.Bundle) > 0 && len(o.Backups.Snapshots.Codec.Recipients) == 0:
		return fmt.Errorf("sidecar: %w", snapshot.ErrBundleNotSealed)
	case o.Backups.SecondaryRetention != nil && o.Backups.SecondaryKeepsAll:
		return errors.New("sidecar: the second site takes a retention of its own or keeps everything, not both")
	case o.Backups.SecondaryRetention != nil:
		if err := o.Backups.SecondaryRetention.Check(); err != nil {
			return fmt.Errorf("sidecar: the second site's retention: %w", err)
		}
	}
	return nil
}

// snapshotOptions are the Snapshotter's options as the sidecar runs it:
// its logger and work dir, every upload fenced by the uploader's lease,
// every result recorded, before the caller's own hooks.
func (s *Sidecar) snapshotOptions() capture.Options {
	so := s.opts.Backups.Snapshots
	so.Logger = s.opts.Logger
	if so.SpoolDir == "" {
		so.SpoolDir = s.opts.WorkDir
	}
	before, after := so.BeforeUpload, so.OnResult
	so.BeforeUpload = func(ctx context.Context, sn snapshot.Snapshot) error {
		if err := s.fence(ctx); err != nil {
			return err
		}
		if before != nil {
			return before(ctx, sn)
		}
		return nil
	}
	so.OnResult = func(r capture.Result) {
		s.result(r)
		if after != nil {
			after(r)
		}
	}
	return so
}

// Run follows the member until ctx ends: it runs the Snapshotter while
// the member leads, promotes the member while it is a learner, and
// defragments on schedule while it is the uploader. When ctx ends it
// stops the Snapshotter, which uploads the pending delta, and returns.
func (s *Sidecar) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { s.compactLoop(ctx) })
	if len(s.opts.Backups.Bundle) > 0 {
		wg.Go(func() { s.bundleLoop(ctx) })
	}
	if s.defrag != nil {
		wg.Go(func() { s.defragLoop(ctx) })
	}
	if s.opts.Backups.DrillPeriod > 0 && s.snap != nil {
		wg.Go(func() { s.drillLoop(ctx) })
	}
	if s.opts.Standby != nil {
		wg.Go(func() { s.follow(ctx) })
	}
	if s.second != nil {
		wg.Go(func() { s.second.loop(ctx, s.up.active) })
	}
	if s.writeOnce != nil {
		wg.Go(func() { s.writeOnce.loop(ctx, s.up.active) })
	}
	member.Follow(ctx, s.opts.Client, s.opts.Endpoint, s.opts.Membership.Follow, func(self member.Self, err error) {
		if ctx.Err() == nil {
			s.observe(ctx, self, err)
		}
	})
	s.up.stop()
	wg.Wait()
	return nil
}

// observe acts on what the member said of itself.
func (s *Sidecar) observe(ctx context.Context, self member.Self, err error) {
	lead := err == nil && (self.IsLeader() || s.leaderless())
	uploading := s.up.active()
	s.member.mu.Lock()
	s.member.self, s.member.err = self, err
	promote := err == nil && self.Learner && !s.member.promoting && !s.opts.Backups.FromOutside
	if promote {
		s.member.promoting = true
	}
	s.member.mu.Unlock()
	switch {
	case lead && !uploading:
		s.up.start(ctx, s.loadChain)
	case !lead && uploading:
		s.log.Info("sidecar: the member no longer leads; stopping uploads", "error", err)
		go s.up.stop()
	}
	if promote {
		go s.promote(ctx, self.ID)
	}
	if !s.opts.Backups.FromOutside {
		s.followRemoval(ctx, self, err)
	}
}

// followRemoval asks the cluster whether it still lists a member that
// stopped answering (noticeRemoval), and clears what that found once the
// member answers again: it runs, so it is a member again.
func (s *Sidecar) followRemoval(ctx context.Context, self member.Self, err error) {
	s.member.mu.Lock()
	id, gone, peers := s.member.id, s.member.gone, s.member.peers
	// A removal a start-up check found is not asked again: its reason
	// says more.
	ask := err != nil && id != 0 && gone == 0 && s.removed.Load() == nil && time.Since(s.member.asked) >= removalAskInterval
	if ask {
		s.member.asked = time.Now()
	}
	learn := err == nil && self.ID != id
	if err == nil {
		s.member.id, s.member.gone = self.ID, 0
	}
	s.member.mu.Unlock()
	switch {
	case ask:
		s.noticeRemoval(ctx, id, peers)
	case err == nil && gone != 0:
		s.removed.Store(nil)
		s.metrics.memberRemoved.Set(0)
	}
	if learn {
		s.learnPeers(ctx, self.ID)
	}
}

// learnPeers keeps the peer URLs the cluster lists for the member with
// id: a member that rejoins (its data dir moved aside, added again as a
// learner) is listed under a new ID at the same peer URLs.
func (s *Sidecar) learnPeers(ctx context.Context, id uint64) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := s.opts.Client.MemberList(ctx)
	if err != nil {
		return
	}
	for _, m := range resp.Members {
		if m.ID == id {
			s.member.mu.Lock()
			s.member.peers = m.PeerURLs
			s.member.mu.Unlock()
		}
	}
}

// noLongerListed says whether members, as the cluster lists them, no longer
// hold the member with id: neither that ID nor, under a new ID, its peer
// URLs (a member that rejoins).
func noLongerListed(members []*etcdserverpb.Member, id uint64, peers []string) bool {
	return !slices.ContainsFunc(members, func(m *etcdserverpb.Member) bool {
		return m.ID == id || slices.ContainsFunc(m.PeerURLs, func(u string) bool { return slices.Contains(peers, u) })
	})
}

// removalAskInterval bounds how often the cluster is asked whether it
// still lists a member that does not answer.
const removalAskInterval = 5 * time.Second

// noticeRemoval asks the cluster whether it still lists the member with
// id and peers, which stopped answering. One it no longer lists was
// removed on purpose (while it ran, etcd stops it): it stays out, as one
// whose start-up found it removed does, and /readyz and the metric say so
// where no start-up check runs here. An answer that lists it, or its peer
// URLs under a new ID (it rejoins), or no answer, says nothing.
func (s *Sidecar) noticeRemoval(ctx context.Context, id uint64, peers []string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := s.opts.Client.MemberList(ctx)
	if err != nil || !noLongerListed(resp.Members, id, peers) {
		return
	}
	s.member.mu.Lock()
	s.member.gone = id
	s.member.mu.Unlock()
	s.holdOut(fmt.Sprintf("cluster %x no longer lists member %x, which stopped answering: it was removed on purpose; to bring it back, add it again (etcdctl member add) and start it on an empty data dir", resp.Header.GetClusterId(), id), false)
}

// Uploader says whether this sidecar uploads now.
func (s *Sidecar) Uploader() bool { return s.up.active() }

// fence fails unless the member leads right now (or, outside the cluster,
// answers), asked afresh: the last observation may be up to an interval
// old.
func (s *Sidecar) fence(ctx context.Context) error {
	self, err := member.Ask(ctx, s.opts.Client, s.opts.Endpoint, 2*time.Second)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if !self.IsLeader() && !s.leaderless() {
		return ErrNotUploader
	}
	return nil
}

// leaderless: the datastore behind etcd's API has no leader (kine over a
// SQL database), or the sidecar backs up from outside the cluster
// (FromOutside): the sidecar that reaches it uploads, and a second one on
// the same prefix is stopped by the uploader records
// (snapshot.ErrNewerUploader).
func (s *Sidecar) leaderless() bool {
	return s.opts.Backups.Snapshots.Source == snapshot.SourceEtcdAPI || s.opts.Backups.FromOutside
}

func (s *Sidecar) promote(ctx context.Context, id uint64) {
	start := time.Now()
	var err error
	if len(s.opts.Membership.PromoteVia) > 0 {
		err = startup.Promote(ctx, s.opts.Membership.Conn, s.opts.Membership.PromoteVia, id, s.opts.Membership.Promote)
	} else {
		err = member.PromoteWhenReady(ctx, s.opts.Client, id, s.opts.Membership.Promote)
	}
	s.ran(Operation{Name: "promote", Took: time.Since(start), Err: err})
	if err != nil {
		s.log.Error("sidecar: promote the member", "id", fmt.Sprintf("%x", id), "error", err)
	} else {
		s.log.Info("sidecar: member promoted", "id", fmt.Sprintf("%x", id))
	}
	s.member.mu.Lock()
	s.member.promoting = false
	s.member.mu.Unlock()
}

// loadChain reads the latest chain's length from the store, so the
// metrics and the compaction threshold start from what is there.
func (s *Sidecar) loadChain(ctx context.Context) {
	cat, err := snapshot.List(ctx, s.opts.Backups.Store)
	if err != nil {
		return
	}
	chain, err := cat.Latest()
	if err != nil {
		return
	}
	s.metrics.chain(s.chain.load(chain))
	s.estimate()
}

// result records a Snapshotter result, and asks for a compaction of the
// chain when it has grown past the threshold.
func (s *Sidecar) result(r capture.Result) {
	s.metrics.result(r)
	if r.Err != nil {
		// The Snapshotter said it, once per run of failures.
		s.log.Debug("sidecar: snapshot failed", "op", r.Op, "reason", r.Reason, "error", r.Err)
		return
	}
	s.up.succeeded()
	if r.Op == capture.OpFull && len(s.opts.Backups.Bundle) > 0 {
		// The newest full replaces one still waiting: the files are
		// read when the bundle is written.
		select {
		case <-s.bundles:
		default:
		}
		s.bundles <- r.Snapshot
	}
	if s.second != nil && r.Snapshot.Key != "" {
		s.second.written()
	}
	deltas, revs := s.chain.uploaded(r)
	s.metrics.chain(deltas, revs)
	_, overBudget := s.estimate()
	if (s.opts.Backups.CompactAfter > 0 && revs >= s.opts.Backups.CompactAfter || overBudget) && s.up.active() && s.chain.begin() {
		select {
		case s.compactions <- struct{}{}:
		default:
			s.chain.end()
		}
	}
}

// bundleLoop writes the restore bundle beside each full result hands
// it, until ctx ends.
func (s *Sidecar) bundleLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case full := <-s.bundles:
			s.writeBundle(ctx, full)
		}
	}
}

// writeBundle writes the restore bundle beside full when its files
// changed; a failure is logged and counted, and the backups go on.
func (s *Sidecar) writeBundle(ctx context.Context, full snapshot.Snapshot) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	b, wrote, err := snapshot.WriteBundle(ctx, s.opts.Backups.Store, full, s.opts.Backups.Bundle, s.opts.Backups.Snapshots.Codec)
	switch {
	case err != nil:
		s.metrics.failures.WithLabelValues("bundle").Inc()
		s.log.Warn("sidecar: the restore bundle was not written; the next full tries again", "full", full.Key, "error", err)
	case wrote:
		s.log.Info("restore bundle written: its files changed", "key", b.Key, "bytes", b.Size)
	}
}

// compactLoop runs the compactions result asks for, until ctx ends.
func (s *Sidecar) compactLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.compactions:
			_, _ = s.compact(ctx)
		}
	}
}

// Compact compacts the latest chain into a new full snapshot, locally:
// errBusy while a compaction runs.
func (s *Sidecar) Compact(ctx context.Context) (compact.Result, error) {
	if !s.chain.begin() {
		return compact.Result{}, errBusy
	}
	return s.compact(ctx)
}

// compact runs a compaction begun with chain.begin, and ends it.
func (s *Sidecar) compact(ctx context.Context) (compact.Result, error) {
	defer s.chain.end()
	if s.snap == nil {
		return compact.Result{}, ErrNoStore
	}
	start := time.Now()
	c, err := compact.Compact(ctx, s.opts.Backups.Store, compact.Options{
		Read:    restore.ReadOptions{Codec: s.opts.Backups.Snapshots.Codec, Logger: s.log},
		Full:    snapshot.FullOptions{Codec: s.opts.Backups.Snapshots.Codec, SpoolDir: s.opts.WorkDir, BeforeUpload: func(ctx context.Context, _ snapshot.Snapshot) error { return s.fence(ctx) }},
		WorkDir: s.opts.WorkDir,
	})
	s.ran(Operation{Name: "compaction", Took: time.Since(start), Err: err})
	if err != nil {
		s.metrics.failures.WithLabelValues("compaction").Inc()
		s.log.Error("sidecar: compaction of the chain failed", "error", err)
		return c, err
	}
	s.log.Info("sidecar: chain compacted", "revision", c.Snapshot.LastRevision, "revisions", c.Revisions, "took", c.Took)
	s.chain.consolidated(c)
	s.estimate()
	return c, nil
}

// Defrag defragments the cluster with the sidecar's options, dry run as
// asked.
func (s *Sidecar) Defrag(ctx context.Context, dryRun bool) (defrag.Result, error) {
	o := s.opts.Defrag.Options
	o.DryRun = o.DryRun || dryRun
	if o.Logger == nil {
		o.Logger = s.log
	}
	start := time.Now()
	r, err := defrag.Run(ctx, s.opts.Client, o)
	s.ran(Operation{Name: "defrag", Took: time.Since(start), Err: err, Defrag: r})
	return r, err
}

func (s *Sidecar) defragLoop(ctx context.Context) {
	for {
		next := s.defrag.Next(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		if !s.Uploader() {
			continue
		}
		if r, err := s.Defrag(ctx, false); err != nil {
			s.log.Error("sidecar: scheduled defragmentation failed", "error", err)
		} else {
			s.log.Info("sidecar: scheduled defragmentation", "members", len(r.Members))
		}
	}
}

// ran records an operation in the metrics and tells OnOperation.
func (s *Sidecar) ran(op Operation) {
	switch op.Name {
	case "remove", "add-learner", "promote":
		s.metrics.memberOp(op.Name, op.Err)
	default:
		s.metrics.durations.WithLabelValues(op.Name).Observe(op.Took.Seconds())
	}
	if s.opts.OnOperation != nil {
		s.opts.OnOperation(op)
	}
}

// Full takes a full snapshot now (marked final when asked) through the
// running Snapshotter: ErrNotUploader unless this sidecar uploads.
func (s *Sidecar) Full(ctx context.Context, final bool) (snapshot.Snapshot, error) {
	switch {
	case s.snap == nil:
		return snapshot.Snapshot{}, ErrNoStore
	case !s.Uploader():
		return snapshot.Snapshot{}, ErrNotUploader
	case final:
		return s.snap.TakeFinal(ctx)
	}
	return s.snap.TakeFull(ctx)
}

// Delta uploads the events captured so far as a delta now:
// capture.ErrNoEvents when there are none, ErrNotUploader unless this
// sidecar uploads.
func (s *Sidecar) Delta(ctx context.Context) (snapshot.Snapshot, error) {
	switch {
	case s.snap == nil:
		return snapshot.Snapshot{}, ErrNoStore
	case !s.Uploader():
		return snapshot.Snapshot{}, ErrNotUploader
	}
	return s.snap.TakeDelta(ctx)
}

// Registry is where the sidecar's metrics are, for a caller's beside them.
func (s *Sidecar) Registry() *prometheus.Registry { return s.registry }

// Member is what the member last said of itself, or why it did not
// answer.
func (s *Sidecar) Member() (member.Self, error) {
	s.member.mu.Lock()
	defer s.member.mu.Unlock()
	return s.member.self, s.member.err
}

// Prepare runs the start-up procedure for this sidecar's member, from its
// store: validate, decide, then restore, join or rejoin.
func (s *Sidecar) Prepare(ctx context.Context, cfg startup.Config, o startup.Options) (startup.Plan, error) {
	if o.Logger == nil {
		o.Logger = s.log
	}
	onMember := o.OnMember
	o.OnMember = func(op string, took time.Duration, err error) {
		s.ran(Operation{Name: op, Took: took, Err: err})
		if onMember != nil {
			onMember(op, took, err)
		}
	}
	p, err := startup.Prepare(ctx, cfg, timedPreparer{s.source(nil), s}, o)
	if r := (*startup.Refusal)(nil); errors.As(err, &r) && r.Plan.Hold {
		// The cluster removed the member, as the data dir or the
		// cluster told.
		s.holdOut(r.Plan.Reason, true)
	}
	return p, err
}

// timedPreparer is a Source whose checks and restores are recorded as the
// sidecar's operations.
type timedPreparer struct {
	startup.Preparer
	s *Sidecar
}

func (t timedPreparer) Check(ctx context.Context, cfg startup.Config) (startup.Check, error) {
	start := time.Now()
	chk, err := t.Preparer.Check(ctx, cfg)
	t.s.ran(Operation{Name: "validation", Took: time.Since(start), Err: err})
	if err == nil {
		t.s.checked(chk)
	}
	return chk, err
}

// checked keeps what a start-up check found of a member the cluster
// removed, for /readyz and the metric: it stays so until a check finds
// otherwise.
func (s *Sidecar) checked(chk startup.Check) {
	if chk.Verdict != validate.Removed {
		s.removed.Store(nil)
		s.metrics.memberRemoved.Set(0)
		return
	}
	s.holdOut(chk.Reason, true)
}

// holdOut keeps why the cluster removed the member, which stays out;
// over a reason kept before only when replace.
func (s *Sidecar) holdOut(reason string, replace bool) {
	if replace {
		s.removed.Store(&reason)
	} else if !s.removed.CompareAndSwap(nil, &reason) {
		return
	}
	s.log.Warn("sidecar: the cluster removed this member on purpose; it stays out", "reason", reason)
	s.metrics.memberRemoved.Set(1)
}

// Removed is why the member's data dir stays out, "" when it does not
// (as the last start-up check found).
func (s *Sidecar) Removed() string {
	if r := s.removed.Load(); r != nil {
		return *r
	}
	return ""
}

func (t timedPreparer) Restore(ctx context.Context, cfg startup.Config, p startup.Plan) (startup.RestoreResult, error) {
	start := time.Now()
	res, err := t.Preparer.Restore(ctx, cfg, p)
	t.s.ran(Operation{Name: "restore", Took: time.Since(start), Err: err})
	return res, err
}

// SnapshotStatus is the Snapshotter's state: the newest revision on the
// store, the last snapshots, the events not yet uploaded. Its LastFull is
// a compaction's full snapshot when that is the later one.
func (s *Sidecar) SnapshotStatus() capture.Status {
	if s.snap == nil {
		return capture.Status{}
	}
	return s.chain.withCompacted(s.snap.Status())
}

// PeerURLs are the member's peer URLs as the cluster has them.
func (s *Sidecar) PeerURLs(ctx context.Context) ([]string, error) {
	self, err := s.Member()
	if err != nil {
		return nil, err
	}
	resp, err := s.opts.Client.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	for _, m := range resp.Members {
		if m.ID == self.ID {
			return m.PeerURLs, nil
		}
	}
	return nil, fmt.Errorf("member %x is not in the member list", self.ID)
}

// HasStore says whether the sidecar has a store, and so takes backups.
func (s *Sidecar) HasStore() bool { return s.snap != nil }
