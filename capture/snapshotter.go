package capture

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// ErrNotRunning is returned by on-demand snapshots while Run is not running.
var ErrNotRunning = errors.New("the snapshotter is not running")

// Off turns off a period of Options whose zero value is its default
// (FullRepeatWindow, DeltaPeriod, RetentionPeriod, ProbeInterval): any
// negative duration does.
const Off time.Duration = -1

// Options configures a Snapshotter. The zero value takes a
// full snapshot every hour, a delta 20 s after its first event or at
// 50 MiB of events, and applies the Exponential retention every minute.
type Options struct {
	// FullSchedule is a cron expression (5 fields, or descriptors such as
	// @every 6h) for full snapshots. Default "0 * * * *": hourly.
	FullSchedule string
	// FullSplay delays each scheduled full by an offset below it, fixed
	// for the store's prefix (a hash of its URL): the sidecars of a fleet
	// on one bucket, all on "0 * * * *", do not stream their fulls at
	// once, and one restarted keeps its time. Keep it below the
	// schedule's period. 0: none.
	FullSplay time.Duration
	// FullRepeatWindow is how long after an on-demand full snapshot ends
	// a repeat of the request that went unanswered (its caller gave up
	// before the end) is answered with it rather than taking another; a
	// request made while any full runs waits for it and gets its result. A
	// client that timed out on a long full and asks again (etcd-druid's
	// compaction, druid#1259) must not stream a second one from the
	// leader; a request whose answer was received is never repeated so.
	// Default a minute; Off: only while it runs.
	FullRepeatWindow time.Duration
	// DeltaPeriod is the longest an event waits in memory: a delta is
	// written this long after the oldest buffered event arrived. Default
	// 20 s; Off: no deltas, full snapshots only.
	DeltaPeriod time.Duration
	// DeltaMemoryLimit bounds the events held in memory: those buffered
	// plus the delta being uploaded. A delta is written as soon as the
	// buffer holds half of it, and the watch pauses at the limit (etcd keeps
	// the backlog). Default 100 MiB. The process's heap needs room beyond
	// it; a sidecar sets GOMEMLIMIT to about the limit plus 48 MiB.
	DeltaMemoryLimit int64
	// RetentionPeriod is how often GC runs. Default 1 min; Off: never.
	RetentionPeriod time.Duration
	Retention       snapshot.Retention
	Codec           snapshot.Codec
	// Source is what the client reaches: an etcd cluster (the default) or
	// a datastore behind etcd's API (snapshot.SourceEtcdAPI: kine), whose
	// fulls are logical.
	Source snapshot.SourceKind
	// SpoolDir is where full snapshots are spooled. Default os.TempDir().
	SpoolDir string
	// FullFrom, when set, gives the client a full snapshot streams from
	// (a healthy follower's, so that a long full does not load the leader)
	// and how to release it. When it fails, the full streams from the
	// Snapshotter's own client's member, as without it. The full's name is
	// read from the streamed database, so it is the revision the follower
	// held; that client's member is first asked a linearizable read, so it
	// holds at least every revision already in a delta.
	FullFrom func(context.Context) (*clientv3.Client, func(), error)
	// AllowNewChain: when the store's newest chain is another cluster's
	// (snapshot.ErrOtherCluster), begin a timeline of this cluster's own with a full
	// snapshot instead of failing.
	AllowNewChain bool
	// BeforeUpload, when set, is called right before each object is written;
	// an error skips the write and counts as a failure (fencing).
	BeforeUpload func(context.Context, snapshot.Snapshot) error
	// OnResult, when set, is called after every snapshot and GC attempt,
	// from the loop's goroutine. Metrics hang here.
	OnResult func(Result)
	// MinBackoff and MaxBackoff bound the wait before a failed snapshot is
	// tried again. Defaults 1 s and 5 min.
	MinBackoff, MaxBackoff time.Duration
	// ProbeInterval: while a retry is further away than this, the store
	// and the member are asked this often whether they answer again; when
	// both do, the retry comes at once, so the backups resume within
	// seconds of an outage's end, not at the end of a long backoff.
	// Default 5 s; Off: no probes.
	ProbeInterval time.Duration
	// StopTimeout bounds the flush of pending events when Run's context
	// ends: half of it for catching up with the cluster, the rest, when
	// that fails (no quorum), for writing the events received. Default
	// 30 s.
	StopTimeout time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
	// Now is the clock of names, events and retention. Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.FullSchedule == "" {
		o.FullSchedule = "0 * * * *"
	}
	if o.DeltaPeriod == 0 {
		o.DeltaPeriod = 20 * time.Second
	}
	if o.RetentionPeriod == 0 {
		o.RetentionPeriod = time.Minute
	}
	if o.FullRepeatWindow == 0 {
		o.FullRepeatWindow = time.Minute
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 30 * time.Second
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Operation is what a Result reports on.
type Operation string

const (
	OpFull  Operation = "full"
	OpDelta Operation = "delta"
	OpGC    Operation = "gc"
)

// Result is the outcome of one snapshot or GC attempt.
type Result struct {
	Op Operation
	// Reason says why it ran: schedule, startup, period, memory-limit,
	// on-demand, compacted, gap, retry, stop.
	Reason   string
	Snapshot snapshot.Snapshot   // the snapshot written, for a successful full or delta
	Events   int                 // events in a delta
	Deleted  int                 // snapshots deleted by GC
	Expired  []snapshot.Snapshot // and which
	Locked   []snapshot.Snapshot // expired, kept by a write-once lock
	// Kept is what GC keeps, with the rules that keep it, and Deletions
	// the records of operators' deletions on the store.
	Kept      []snapshot.Kept
	Deletions int
	Duration  time.Duration
	Err       error
}

// Status is the Snapshotter's state, safe to read at any time.
type Status struct {
	Running bool
	// Placed: this run placed its backups on the store (Place): what it
	// writes continues the store's chain or begins this cluster's own.
	// A restore drill of the store's chain compares it with this cluster
	// only then.
	Placed bool
	// LastRevision is the newest revision on the store.
	LastRevision int64
	// LastFull and LastDelta are the newest full snapshot and delta of
	// the chain: read from the store at start, then the ones written.
	LastFull  snapshot.Snapshot
	LastDelta snapshot.Snapshot
	// PendingEvents and PendingBytes are captured but not yet uploaded.
	PendingEvents int
	PendingBytes  int64
	// Failures counts consecutive failed attempts; FailingSince is when
	// the first of them began (by the local clock, never Options.Now) and
	// LastError what the last one said.
	// All three clear on a success.
	Failures     int
	FailingSince time.Time
	LastError    string
	// Refused, while the last attempt was refused rather than failed, says
	// why (Refusal): waiting does not help, an operator must act.
	Refused Refusal
	// Demanded counts the on-demand snapshots asked for (TakeFull,
	// TakeFinal, TakeDelta), each from the moment it was asked: the
	// moment that decides whether a full joins the one in flight.
	// Abandoned counts those whose caller stopped waiting first.
	Demanded, Abandoned int64
}

// Refusal is why a Snapshotter refuses to write, "" when it does not.
type Refusal string

const (
	// RefusedOtherCluster: the newest chain is another cluster's
	// (snapshot.ErrOtherCluster).
	RefusedOtherCluster Refusal = "other-cluster"
	// RefusedSuperseded: a newer timeline began on the prefix
	// (snapshot.ErrSuperseded).
	RefusedSuperseded Refusal = "superseded"
	// RefusedConflict: another writer on the prefix: it wrote an object
	// of this name first (snapshot.ErrConflict), or recorded itself as the prefix's
	// uploader after this one (snapshot.ErrNewerUploader).
	RefusedConflict Refusal = "conflict"
)

// Refusals are every Refusal, for metrics that show each from the start.
var Refusals = []Refusal{RefusedOtherCluster, RefusedSuperseded, RefusedConflict}

// RefusalOf says which refusal err is, "" for a failure.
func RefusalOf(err error) Refusal {
	switch {
	case errors.Is(err, snapshot.ErrOtherCluster):
		return RefusedOtherCluster
	case errors.Is(err, snapshot.ErrSuperseded):
		return RefusedSuperseded
	case errors.Is(err, snapshot.ErrConflict), errors.Is(err, snapshot.ErrNewerUploader):
		return RefusedConflict
	}
	return ""
}

// Snapshotter keeps a store's backups current: full snapshots on a
// schedule, deltas in between, retention, and snapshots on demand.
type Snapshotter struct {
	cli      *clientv3.Client
	st       store.Store
	opts     Options
	schedule cron.Schedule
	log      *slog.Logger
	reqs     chan request

	mu     sync.Mutex
	status Status
}

type request struct {
	op Operation
	// final marks a full snapshot as the last before the member stops
	// for good (etcd-backup-restore's .final).
	final bool
	// at is when it was asked: one asked while a full ran joins it.
	at time.Time
	// gaveUp is set when its caller stopped waiting for the answer.
	gaveUp *atomic.Bool
	reply  chan Result
}

// New checks opts and returns a Snapshotter for the member cli talks to.
func New(cli *clientv3.Client, st store.Store, opts Options) (*Snapshotter, error) {
	opts = opts.withDefaults()
	schedule, err := cron.ParseStandard(opts.FullSchedule)
	if err != nil {
		return nil, fmt.Errorf("full snapshot schedule %q: %w", opts.FullSchedule, err)
	}
	if err := opts.Codec.Check(); err != nil {
		return nil, err
	}
	if err := opts.Retention.Check(); err != nil {
		return nil, err
	}
	if opts.FullSplay > 0 {
		schedule = Splayed(schedule, fmt.Sprint(st), opts.FullSplay)
	}
	return &Snapshotter{
		cli: cli, st: st, opts: opts, schedule: schedule,
		log: opts.Logger, reqs: make(chan request),
	}, nil
}

// Status returns a copy of the current state.
func (s *Snapshotter) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// TakeFull takes a full snapshot now, through the running loop.
func (s *Snapshotter) TakeFull(ctx context.Context) (snapshot.Snapshot, error) {
	return s.demand(ctx, request{op: OpFull})
}

// TakeFinal takes a full snapshot marked final, as an operator does
// before the cluster stops for good (etcd-druid's copy of backups waits
// for it).
func (s *Snapshotter) TakeFinal(ctx context.Context) (snapshot.Snapshot, error) {
	return s.demand(ctx, request{op: OpFull, final: true})
}

// TakeDelta writes every event up to the cluster's current revision now,
// through the running loop, and returns the last delta written (there are
// several when the events exceed the memory limit). ErrNoEvents: nothing
// changed.
func (s *Snapshotter) TakeDelta(ctx context.Context) (snapshot.Snapshot, error) {
	return s.demand(ctx, request{op: OpDelta})
}

func (s *Snapshotter) demand(ctx context.Context, req request) (snapshot.Snapshot, error) {
	if !s.Status().Running {
		return snapshot.Snapshot{}, ErrNotRunning
	}
	req.reply, req.at, req.gaveUp = make(chan Result, 1), time.Now(), &atomic.Bool{}
	s.mu.Lock()
	s.status.Demanded++
	s.mu.Unlock()
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return snapshot.Snapshot{}, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.Snapshot, r.Err
	case <-ctx.Done():
		req.gaveUp.Store(true)
		s.mu.Lock()
		s.status.Abandoned++
		s.mu.Unlock()
		return snapshot.Snapshot{}, ctx.Err()
	}
}

// loop is Run's state; only Run's goroutine touches it.
type loop struct {
	*Snapshotter
	capture *capture
	// needFull says why the next attempt must be a full snapshot; "" when
	// a delta continues the chain.
	needFull string
	started  bool
	// timeline is the one Place gave: the loop writes only while it is
	// the store's newest, and while guard finds the cluster the one it
	// placed.
	timeline snapshot.Timeline
	guard    *guard
	// uploader is this run's record: the loop writes only while no newer
	// run recorded itself (newerUploader).
	uploader snapshot.Uploader
	// chained: the store's latest chain runs up to capture.last, so a new
	// full snapshot first closes it with the revisions before it.
	chained  bool
	failures int
	lastFull lastFull
	// checked are the fulls retention found to hold what their names say.
	checked snapshot.CheckedFulls
	retry   *time.Timer
	// probe asks, while a retry is far off, whether what failed answers
	// again; retryReason is why the retry came early ("" when it did not).
	probe       *time.Timer
	retryReason string
	// answered: this outage's probe said once that everything answers
	// again. A store that lists but refuses writes answers every probe;
	// the retry that follows fails again, and saying it each time would
	// read as a recovery each time.
	answered bool
	// uploads reports the background delta upload, at most one at a time.
	uploads   chan upload
	uploading bool
	// upCtx outlives Run's context so that stopping lets the upload in
	// flight finish.
	upCtx    context.Context
	upCancel context.CancelFunc
	// The schedule's timers. deltaDue is when deltaTimer fires, zero
	// while it is stopped.
	fullTimer, deltaTimer, gcTimer *time.Timer
	deltaDue                       time.Time
}

type upload struct {
	snap   snapshot.Snapshot
	ann    snapshot.Annotations
	events int
	reason string
	start  time.Time
	err    error
}

// Run takes snapshots until ctx ends, then writes the pending events as a
// last delta and returns. At start it takes a full snapshot when the store
// has no usable chain or the last full one missed its schedule, and a
// delta of what happened since the chain's end otherwise. Failures are
// retried with exponential backoff, ErrStoreAhead at start too (an
// operator may fix the store or its prefix meanwhile); Run returns when
// ctx ends.
func (s *Snapshotter) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.status.Running {
		s.mu.Unlock()
		return errors.New("the snapshotter is already running")
	}
	s.status.Running = true
	s.mu.Unlock()
	defer s.setStatus(func(st *Status) { st.Running, st.Placed = false, false })

	l := &loop{Snapshotter: s, retry: time.NewTimer(0), probe: stoppedTimer(), uploads: make(chan upload, 1)}
	l.upCtx, l.upCancel = context.WithCancel(context.WithoutCancel(ctx))
	defer l.upCancel()
	l.capture = newCapture(s.cli, s.st, 0, DeltaOptions{
		Codec: s.opts.Codec, Source: s.opts.Source, MemoryLimit: s.opts.DeltaMemoryLimit,
		BeforeUpload: l.beforeUpload, Logger: s.opts.Logger, Now: s.opts.Now,
	})
	l.capture.timeline = &l.timeline
	defer l.capture.stop()
	return l.run(ctx)
}

func (l *loop) run(ctx context.Context) error {
	l.fullTimer, l.deltaTimer, l.gcTimer = stoppedTimer(), stoppedTimer(), stoppedTimer()
	defer func() {
		for _, t := range []*time.Timer{l.retry, l.probe, l.fullTimer, l.deltaTimer, l.gcTimer} {
			t.Stop()
		}
	}()
	if l.opts.RetentionPeriod > 0 {
		l.gcTimer.Reset(l.opts.RetentionPeriod)
	}
	for {
		l.armDelta()
		if l.healthy() && l.opts.DeltaPeriod > 0 {
			l.capture.start(ctx)
		}
		select {
		case <-ctx.Done():
			return l.stop()
		case <-l.retry.C:
			l.probe.Stop()
			l.retried(ctx)
		case <-l.probe.C:
			l.probed(ctx)
		case wr, ok := <-l.capture.watching():
			l.watched(ctx, wr, ok)
		case u := <-l.uploads:
			l.landed(u)
			if l.healthy() && l.capture.due() {
				l.startUpload("memory-limit")
			}
		case <-l.deltaTimer.C:
			l.deltaDue = time.Time{}
			if l.healthy() {
				l.startUpload("period")
			}
		case <-l.fullTimer.C:
			if l.started {
				l.full(ctx, "schedule", false)
			}
			l.nextFull()
		case <-l.gcTimer.C:
			l.gc(ctx)
			l.gcTimer.Reset(l.opts.RetentionPeriod)
		case req := <-l.reqs:
			req.reply <- l.demanded(ctx, req)
		}
	}
}

// nextFull arms the full snapshot's timer for the schedule's next time.
func (l *loop) nextFull() {
	l.fullTimer.Reset(l.schedule.Next(l.opts.Now()).Sub(l.opts.Now()))
}

// armDelta arms the delta's timer from the oldest buffered event, so no
// event waits longer than the period before its delta is written.
func (l *loop) armDelta() {
	// While unhealthy the retry writes the buffer, not the period.
	if len(l.capture.pending) == 0 || l.opts.DeltaPeriod <= 0 || !l.healthy() || l.uploading {
		l.deltaTimer.Stop()
		l.deltaDue = time.Time{}
		return
	}
	if due := l.capture.pending[0].Time.Add(l.opts.DeltaPeriod); !due.Equal(l.deltaDue) {
		l.deltaDue = due
		// A clock stepped back since the event came puts its due as far
		// ahead: from now no event waits longer than the period.
		l.deltaTimer.Reset(min(due.Sub(l.opts.Now()), l.opts.DeltaPeriod))
	}
}

// retried makes the attempt a failure postponed: the start-up while it has
// not succeeded, then the full snapshot due or the pending delta.
func (l *loop) retried(ctx context.Context) {
	reason := cmp.Or(l.retryReason, "retry")
	l.retryReason = ""
	if !l.started {
		start := time.Now()
		if err := l.startup(ctx); err != nil {
			l.fail(OpFull, "startup", err, start)
			return
		}
		reason = "startup"
		l.nextFull()
	}
	switch {
	case l.needFull != "":
		l.full(ctx, l.needFull, false)
	case l.opts.DeltaPeriod > 0:
		l.delta(ctx, reason)
	default:
		l.succeed()
	}
}

// watched buffers a watch response's events, and starts an upload when
// the buffer reaches its memory limit.
func (l *loop) watched(ctx context.Context, wr clientv3.WatchResponse, ok bool) {
	if !ok {
		l.capture.stop()
		if ctx.Err() == nil {
			l.fail(OpDelta, "watch", errors.New("watch closed"), time.Now())
		}
		return
	}
	if err := l.capture.add(ctx, wr); err != nil {
		if errors.Is(err, ErrCompacted) {
			l.needFull, l.chained = "compacted", false
		}
		l.fail(OpDelta, "watch", err, time.Now())
		return
	}
	l.publish()
	if l.capture.due() {
		l.startUpload("memory-limit")
	}
}

// demanded takes the snapshot a caller asked for (TakeFull, TakeDelta).
func (l *loop) demanded(ctx context.Context, req request) Result {
	op := req.op
	switch {
	case !l.started:
		return Result{Op: op, Err: errors.New("the snapshotter has not started: the store or the cluster is unreachable")}
	case op == OpFull:
		if r, ok := l.joins(req); ok {
			l.log.Info("an on-demand full snapshot is answered with the one it was asked during or right after",
				"snapshot", r.Snapshot.Key, "asked", req.at, "ended", l.lastFull.ended, "error", r.Err)
			return r
		}
		r := l.full(ctx, "on-demand", req.final)
		l.lastFull.askers = []*atomic.Bool{req.gaveUp}
		l.nextFull()
		return r
	case l.needFull != "":
		return Result{Op: OpDelta, Err: fmt.Errorf("a full snapshot is due first (%s)", l.needFull)}
	}
	return l.delta(ctx, "on-demand")
}

// lastFull is the last full snapshot the loop took, by any reason.
type lastFull struct {
	started, ended time.Time
	final          bool
	result         Result
	// askers are the requests it answered: none for a scheduled one.
	askers []*atomic.Bool
}

// unanswered says whether every request it answered gave up first: a
// repeat of one is answered with it.
func (f lastFull) unanswered() bool {
	for _, a := range f.askers {
		if !a.Load() {
			return false
		}
	}
	return len(f.askers) > 0
}

// joins answers an on-demand full with the last full when it was asked
// while that one ran (its result, failed or not), or within
// FullRepeatWindow of the successful end of one whose every asker gave
// up; a final one is answered only with a final one.
func (l *loop) joins(req request) (Result, bool) {
	f := &l.lastFull
	switch {
	case f.started.IsZero(), req.at.Before(f.started), req.final && !f.final:
		return Result{}, false
	case !req.at.After(f.ended),
		f.unanswered() && f.result.Err == nil && req.at.Sub(f.ended) <= l.opts.FullRepeatWindow:
		f.askers = append(f.askers, req.gaveUp)
		return f.result, true
	}
	return Result{}, false
}

// healthy: deltas continue the chain and nothing waits for a retry.
func (l *loop) healthy() bool { return l.started && l.needFull == "" && l.failures == 0 }

// startup places the cluster's backups on the store (Place) and decides
// the first snapshot: a full one unless the cluster continues the newest
// chain.
func (l *loop) startup(ctx context.Context) error {
	if sw, ok := store.AsSweeper(l.st); ok {
		// A snapshot killed mid-write left its temporary file there.
		sw.Sweep()
	}
	lin, cat, err := Place(ctx, l.cli, l.st, PlaceOptions{AllowNewChain: l.opts.AllowNewChain, Codec: l.opts.Codec, Source: l.opts.Source,
		SpoolDir: l.opts.SpoolDir, Logger: l.opts.Logger, Now: l.opts.Now})
	if err != nil {
		return err
	}
	l.timeline, l.guard = lin.Timeline, newGuard(ctx, l.cli)
	// Recorded once the backups are placed: a run that is refused (another
	// cluster's, say) must not stop the one that writes.
	if l.uploader.Seq == 0 {
		if l.uploader, err = snapshot.RegisterUploader(ctx, l.st, snapshot.Uploader{Endpoints: l.cli.Endpoints(), ClusterID: lin.ClusterID, Began: l.opts.Now()}); err != nil {
			return err
		}
		l.log.Info("recorded as the prefix's uploader", "record", l.uploader.Key())
	}
	l.started = true
	l.setStatus(func(st *Status) { st.Placed = true })
	if !lin.Continues {
		l.needFull = "no chain to continue"
		if _, err := cat.Latest(); errors.Is(err, snapshot.ErrNoFull) {
			l.needFull = "no full snapshot"
		}
		if lin.Began {
			l.needFull = "new timeline"
		}
		return nil
	}
	chain, err := cat.Latest()
	if err != nil {
		return err
	}
	l.setStatus(func(st *Status) {
		st.LastFull = chain.Full
		if n := len(chain.Deltas); n > 0 {
			st.LastDelta = chain.Deltas[n-1]
		}
	})
	checked, err := chain.Check()
	switch {
	case err != nil:
		l.log.Warn("the latest chain has a gap: a full snapshot closes it", "err", err)
		l.needFull = "gap"
	case !l.schedule.Next(chain.Full.Created).After(l.opts.Now()):
		l.needFull, l.chained = "schedule missed", true
		l.capture.moveTo(checked.LastRevision())
	default:
		l.chained = true
		l.capture.moveTo(checked.LastRevision())
		l.setStatus(func(st *Status) { st.LastRevision = checked.LastRevision() })
		l.trackLeases(ctx)
	}
	return nil
}

// beforeUpload runs before each object: the cluster must still be the one
// placed (guard), the loop's timeline the newest (snapshot.ErrSuperseded), the
// caller's fencing must pass, and no newer run may have recorded itself as
// the prefix's uploader (snapshot.ErrNewerUploader). The fencing comes before the last:
// a sidecar that no longer leads stops as such, not as a second uploader.
func (l *loop) beforeUpload(ctx context.Context, s snapshot.Snapshot) error {
	if l.guard != nil {
		if err := l.guard.check(ctx); err != nil {
			return err
		}
	}
	if err := snapshot.Newest(ctx, l.st, l.timeline); err != nil {
		return err
	}
	if l.opts.BeforeUpload != nil {
		if err := l.opts.BeforeUpload(ctx, s); err != nil {
			return err
		}
	}
	if l.uploader.Seq > 0 {
		return snapshot.NewerUploader(ctx, l.st, l.uploader)
	}
	return nil
}

// trackLeases has the capture watch the leases etcd holds for revocation:
// before a full snapshot, and at start for the chain's, which this process
// saw no event of.
func (l *loop) trackLeases(ctx context.Context) {
	if l.opts.Source == snapshot.SourceEtcdAPI {
		return // it lists no leases (kine)
	}
	if err := l.capture.leases.track(ctx, l.cli); err != nil {
		l.log.Debug("leases not listed; revocations of leases no event named are not recorded", "error", err)
	}
}

// fullClient is the client a full streams from: FullFrom's, once its
// member has caught up with a linearizable read, or the Snapshotter's own.
func (l *loop) fullClient(ctx context.Context) (*clientv3.Client, func()) {
	if l.opts.FullFrom == nil {
		return l.cli, func() {}
	}
	cli, release, err := l.opts.FullFrom(ctx)
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, fullFromReadTimeout)
		_, err = cli.Get(rctx, "\x00", clientv3.WithCountOnly())
		cancel()
		if err != nil {
			release()
			err = fmt.Errorf("linearizable read: %w", err)
		}
	}
	if err != nil {
		l.log.Warn("full snapshot streams from this member instead", "error", err)
		return l.cli, func() {}
	}
	eps := cli.Endpoints()
	l.log.Info("full snapshot streams from another member", "endpoints", eps)
	return cli, release
}

// fullFromReadTimeout bounds the read that makes a follower catch up
// before its full.
const fullFromReadTimeout = 10 * time.Second

// full takes a full snapshot. The watch stops meanwhile: a long stream
// must not let watch responses pile up in the client.
func (l *loop) full(ctx context.Context, reason string, final bool) Result {
	l.waitUpload()
	l.capture.stop()
	l.trackLeases(ctx)
	start := time.Now()
	cli, release := l.fullClient(ctx)
	src := NewDatastore(l.opts.Source, cli, DatastoreOptions{SpoolDir: l.opts.SpoolDir, Logger: l.opts.Logger})
	snap, err := FullOf(ctx, src, l.st, snapshot.FullOptions{
		Codec: l.opts.Codec, SpoolDir: l.opts.SpoolDir, BeforeUpload: l.beforeUpload,
		Logger: l.opts.Logger, Now: func() time.Time { return l.timeline.Stamp(l.opts.Now()) }, Final: final,
	})
	release()
	r := Result{Op: OpFull, Reason: reason, Snapshot: snap, Duration: time.Since(start), Err: err}
	l.lastFull = lastFull{started: start, ended: time.Now(), final: final, result: r}
	if err != nil {
		// Retried before anything else, so a failing schedule is noticed
		// instead of silently growing one chain.
		if l.needFull == "" {
			l.needFull = reason
		}
		l.fail(OpFull, reason, err, start)
		return r
	}
	var closeErr error
	closeBegan := time.Now()
	if l.chained {
		// The revisions between the last delta and the full belong to the
		// old chain too: without them a point-in-time restore into that
		// stretch has nothing to replay.
		err := l.capture.drainTo(ctx, snap.LastRevision, l.opts.DeltaPeriod, func(s snapshot.Snapshot, events int) {
			l.wrote(Result{Op: OpDelta, Reason: "before full", Snapshot: s, Events: events})
		})
		if err != nil && !errors.Is(err, ErrNoEvents) {
			l.log.Warn("the previous chain ends before the new full snapshot", "full", snap.Key, "err", err)
			closeErr = err
		}
	}
	l.needFull, l.chained = "", true
	l.capture.moveTo(snap.LastRevision)
	l.succeed()
	l.setStatus(func(st *Status) { st.LastFull, st.LastRevision = snap, snap.LastRevision })
	l.publish()
	l.report(r)
	if closeErr != nil {
		// The full holds those revisions, but the delta closing the chain
		// failed on the same store the next delta goes to: the backups
		// fail from here on (metrics, Status, /readyz), not from the next
		// delta's own failure, seconds of a store's retries later.
		l.fail(OpDelta, "before full", closeErr, closeBegan)
	}
	return r
}

// startUpload writes the buffer as a delta in the background while the
// watch goes on filling the next one.
func (l *loop) startUpload(reason string) {
	if l.uploading {
		return
	}
	snap, events, err := l.capture.take(0)
	if err != nil {
		return
	}
	l.uploading = true
	go func() {
		start := time.Now()
		snap, ann, err := l.capture.upload(l.upCtx, snap, events)
		l.uploads <- upload{snap: snap, ann: ann, events: len(events), reason: reason, start: start, err: err}
	}()
}

// waitUpload lands the upload in flight, if any.
func (l *loop) waitUpload() {
	if l.uploading {
		l.landed(<-l.uploads)
	}
}

func (l *loop) landed(u upload) {
	l.uploading = false
	l.capture.landed(u.snap, u.ann, u.err)
	if u.err != nil {
		l.fail(OpDelta, u.reason, u.err, u.start)
		return
	}
	l.succeed()
	l.wrote(Result{Op: OpDelta, Reason: u.reason, Snapshot: u.snap, Events: u.events, Duration: time.Since(u.start)})
}

func (l *loop) wrote(r Result) {
	l.setStatus(func(st *Status) { st.LastDelta, st.LastRevision = r.Snapshot, r.Snapshot.LastRevision })
	l.publish()
	l.report(r)
	// A delta records users and roles but never a password: a full
	// snapshot soon after a change holds the hashes, so a restore loses
	// no password set before it.
	if l.capture.auth.takeMoved() && l.needFull == "" {
		l.needFull = "users and roles changed"
		l.retry.Reset(0)
	}
}

// delta writes every event up to the cluster's current revision now, in as
// many deltas as the memory limit needs, and returns the last one's
// result. No events is no failure.
func (l *loop) delta(ctx context.Context, reason string) Result {
	l.waitUpload()
	r := Result{Op: OpDelta, Reason: reason}
	start := time.Now()
	r.Err = l.capture.drain(ctx, l.opts.DeltaPeriod, func(s snapshot.Snapshot, events int) {
		r.Snapshot, r.Events, r.Duration = s, events, time.Since(start)
		l.succeed()
		l.wrote(r)
		start = time.Now()
	})
	switch {
	case r.Err == nil || errors.Is(r.Err, ErrNoEvents):
		l.succeed()
	default:
		if errors.Is(r.Err, ErrCompacted) {
			l.needFull, l.chained = "compacted", false
		}
		l.fail(OpDelta, reason, r.Err, start)
	}
	return r
}

func (l *loop) gc(ctx context.Context) {
	start := time.Now()
	gc, err := snapshot.GC(ctx, l.st, l.opts.Retention, snapshot.GCOptions{Logger: l.opts.Logger, Now: l.opts.Now,
		Codec: l.opts.Codec, SpoolDir: l.opts.SpoolDir, Checked: &l.checked})
	if err != nil {
		l.log.Warn("retention failed", "err", err)
	}
	l.report(Result{Op: OpGC, Reason: "period", Deleted: len(gc.Deleted), Expired: gc.Deleted, Locked: gc.Locked, Kept: gc.Kept,
		Deletions: gc.Deletions, Duration: time.Since(start), Err: err})
}

// stop lets the upload in flight finish and writes what is pending, with
// a deadline of its own since ctx is gone: a member stopped on purpose
// leaves its last writes on the store.
func (l *loop) stop() error {
	l.capture.stop()
	deadline := time.AfterFunc(l.opts.StopTimeout, l.upCancel)
	defer deadline.Stop()
	l.waitUpload()
	if !l.started || l.needFull != "" {
		return nil
	}
	if refused := l.Status().Refused; refused != "" {
		// Nothing this cluster writes belongs on the store now.
		l.log.Warn("stopping without a last delta: the backups are refused", "refused", refused)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.StopTimeout)
	defer cancel()
	// Catching up asks the cluster for its revision first, and without a
	// quorum that question waits out its whole deadline: it has half the
	// time, and writing what was received keeps the rest.
	catchUp, caught := context.WithTimeout(ctx, l.opts.StopTimeout/2)
	r := l.delta(catchUp, "stop")
	caught()
	if refused := RefusalOf(r.Err); refused != "" {
		// Refused only now: the attempt before ended with Run's context.
		l.log.Warn("stopping without a last delta: the backups are refused", "refused", refused, "err", r.Err)
		return nil
	}
	if r.Err != nil && !errors.Is(r.Err, ErrNoEvents) {
		// etcd may be stopping too: write at least what was received.
		caughtUp := r.Err
		l.capture.stop()
		var s snapshot.Snapshot
		s, r.Err = l.capture.flush(ctx)
		switch {
		case r.Err == nil:
			l.log.Warn("catching up before stop failed; wrote what was received", "err", caughtUp, "last_revision", s.LastRevision)
			l.wrote(Result{Op: OpDelta, Reason: "stop", Snapshot: s})
		case errors.Is(r.Err, ErrNoEvents):
			l.log.Warn("catching up before stop failed, and nothing was received past the chain: the next run continues from the chain's end", "err", caughtUp)
		default:
			l.log.Warn("catching up before stop failed, and writing what was received failed too", "err", caughtUp, "write_err", r.Err)
		}
	}
	if r.Err != nil && !errors.Is(r.Err, ErrNoEvents) {
		return r.Err
	}
	return nil
}

func (l *loop) succeed() {
	if l.failures > 0 {
		l.log.Info("snapshots succeed again", "failures", l.failures, "failing_since", l.Status().FailingSince)
	}
	l.failures, l.answered = 0, false
	l.probe.Stop()
	l.setStatus(func(st *Status) { st.Failures, st.FailingSince, st.LastError, st.Refused = 0, time.Time{}, "", "" })
}

// fail reports a failed attempt and schedules the retry with backoff. The
// first failure of a run is a warning, the others debug lines: an outage
// is one warning (and its end one line), not one per attempt; Status and
// the metrics count every attempt. began is when the attempt began: the
// backups have failed since then, not since a store's own retries gave up
// (seconds later), and by the monotonic clock, not Options.Now.
func (l *loop) fail(op Operation, reason string, err error, began time.Time) {
	l.failures++
	wait := l.opts.MinBackoff << min(l.failures-1, 20)
	wait = min(wait, l.opts.MaxBackoff)
	level := slog.LevelWarn
	if l.failures > 1 {
		level = slog.LevelDebug
	}
	l.log.Log(l.upCtx, level, "snapshot failed, retrying", "op", op, "reason", reason, "err", err, "retry-in", wait, "failures", l.failures)
	l.setStatus(func(st *Status) {
		st.Failures, st.LastError, st.Refused = l.failures, err.Error(), RefusalOf(err)
		if st.FailingSince.IsZero() {
			st.FailingSince = began
		}
	})
	l.report(Result{Op: op, Reason: reason, Err: err})
	if errors.Is(err, ErrReplaced) {
		// What the capture holds may be the other past's: dropped, and
		// the backups placed again (the watch resumes from the chain).
		l.capture.stop()
		l.log.Warn("the cluster was replaced under the backups: placing them again; the events received since the last delta are dropped, since they may be the other cluster's",
			"err", err, "dropped_events", len(l.capture.pending))
		l.capture.reset()
		l.started, l.needFull, l.chained = false, "", false
		l.setStatus(func(st *Status) { st.Placed = false })
		wait = l.opts.MinBackoff
	}
	l.retry.Reset(wait)
	// A refusal waits for an operator, not for a store to come back.
	if l.opts.ProbeInterval > 0 && wait > l.opts.ProbeInterval && RefusalOf(err) == "" {
		l.probe.Reset(l.opts.ProbeInterval)
	}
}

// probed asks the store and the member whether they answer; when both
// do, the pending retry comes now.
func (l *loop) probed(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, l.opts.ProbeInterval)
	defer cancel()
	_, storeErr := l.st.List(pctx, path.Dir(l.uploader.Key())+"/")
	_, etcdErr := l.cli.Get(pctx, "\x00", clientv3.WithCountOnly())
	if storeErr != nil || etcdErr != nil {
		l.probe.Reset(l.opts.ProbeInterval)
		return
	}
	level := slog.LevelInfo
	if l.answered {
		level = slog.LevelDebug
	}
	l.answered = true
	l.log.Log(ctx, level, "the store and the member answer again: retrying now")
	l.retryReason = "answers again"
	l.retry.Reset(0)
}

func (l *loop) publish() {
	n, size := len(l.capture.pending), l.capture.size
	l.setStatus(func(st *Status) { st.PendingEvents, st.PendingBytes = n, size })
}

func (l *loop) report(r Result) {
	if l.opts.OnResult != nil {
		l.opts.OnResult(r)
	}
}

func (s *Snapshotter) setStatus(f func(*Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.status)
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}
