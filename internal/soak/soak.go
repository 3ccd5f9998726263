package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/internal/gobuild"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/tlsfiles"
)

// harness is one soak: the cluster, the record, the traffic and what the
// checks found.
type harness struct {
	o     Options
	dir   string
	c     *cluster
	cli   *clientv3.Client
	rec   *record
	tr    *traffic
	st    store.Store // the store, read directly
	rnd   *rand.Rand
	round []string // the fault kinds still to come in this round
	start time.Time

	mu         sync.Mutex
	report     Report
	heads      []headSample // the store's newest chain's last revision, over time
	windows    []window     // faults from injection to recovery
	dataDirs   map[string]bool
	checked    map[string]bool // store objects whose bytes were checked
	supervised map[*proc]bool  // processes down on purpose
	clusterID  uint64
}

type headSample struct {
	at   time.Time
	head int64
}

type window struct{ from, to time.Time }

// Build builds the binaries under test into dir: the sidecar with the
// etcdkit_soak tag, whose only difference is a wall clock the soak can
// step (cmd/etcd-backup/clock_soak.go).
func Build(ctx context.Context, o *Options, dir string) error {
	o.WrapperBin, o.BackupBin = filepath.Join(dir, "etcd-wrapper"), filepath.Join(dir, "etcd-backup")
	if err := gobuild.Build(ctx, o.WrapperBin, "github.com/etcdkit/etcdkit/cmd/etcd-wrapper"); err != nil {
		return err
	}
	return gobuild.Build(ctx, o.BackupBin, "github.com/etcdkit/etcdkit/cmd/etcd-backup", "-tags", "etcdkit_soak")
}

// Run runs a soak and returns its report. The error is for a harness that
// could not run; what the system did wrong is in Report.Violations.
func Run(ctx context.Context, o Options) (Report, error) {
	o = o.withDefaults()
	if o.WrapperBin == "" || o.BackupBin == "" || o.StoreTarget == "" || o.StoreURL == "" || o.DirectStoreURL == "" || o.Direct == nil {
		return Report{}, errors.New("soak: WrapperBin, BackupBin, StoreTarget, StoreURL, DirectStoreURL and Direct are required")
	}
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "etcdkit-soak-"); err != nil {
			return Report{}, err
		}
	}
	for _, d := range []string{"logs", "wiped", "restores"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return Report{}, err
		}
	}
	h := &harness{o: o, dir: dir, rec: newRecord(), rnd: rand.New(rand.NewPCG(o.Seed, 1)), start: time.Now(),
		dataDirs: map[string]bool{}, checked: map[string]bool{}, supervised: map[*proc]bool{}}
	h.report.Seed, h.report.Dir, h.report.Replay = o.Seed, dir, o.replay()
	h.report.Faults = map[string]int{}
	err := h.run(ctx)
	h.report.Took = time.Since(h.start).Round(time.Second)
	return h.report, err
}

func (h *harness) logf(format string, args ...any) {
	h.o.Logger.Info(fmt.Sprintf(format, args...), "at", time.Since(h.start).Round(time.Millisecond))
}

// violation records what the system did wrong.
func (h *harness) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.report.Violations = append(h.report.Violations, fmt.Sprintf("%s: %s", time.Since(h.start).Round(time.Millisecond), msg))
	h.mu.Unlock()
	h.o.Logger.Error("soak: violation: " + msg)
}

func (h *harness) run(ctx context.Context) (err error) {
	h.st = h.o.Direct
	sp, err := startStoreProxy(h.o.StoreTarget, h.o.Seed)
	if err != nil {
		return err
	}
	defer sp.close()
	storeURL := strings.ReplaceAll(h.o.StoreURL, "{endpoint}", "http://"+sp.addr)
	if h.c, err = newCluster(h.o, h.dir, storeURL, h.o.Env, sp); err != nil {
		return err
	}
	defer h.c.unmountSpools()
	for _, nd := range h.c.nodes {
		if err := h.c.mountSpool(nd); err != nil {
			return err
		}
	}
	if err := h.c.startProxies(); err != nil {
		return err
	}
	defer func() {
		for _, nd := range h.c.nodes {
			for _, p := range []*proc{nd.sidecarProc(), nd.wrapperProc()} {
				if p != nil && p.running() {
					p.kill()
				}
			}
			nd.proxy.close()
		}
	}()

	if err := h.bringUp(ctx); err != nil {
		return err
	}
	defer func() { _ = h.cli.Close() }()

	watchCli, err := h.c.client()
	if err != nil {
		return err
	}
	defer func() { _ = watchCli.Close() }()
	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	defer func() { stopBG(); bgWG.Wait() }()
	goBG := func(f func(context.Context)) {
		bgWG.Add(1)
		go func() { defer bgWG.Done(); f(bg) }()
	}
	goBG(func(ctx context.Context) { h.rec.watch(ctx, watchCli) })
	goBG(h.sampleHeads)
	goBG(h.supervise)
	goBG(h.onDemandFulls)
	goBG(h.checkObjects)

	trafficCli, err := h.c.client()
	if err != nil {
		return err
	}
	defer func() { _ = trafficCli.Close() }()
	tctx, stopTraffic := context.WithCancel(ctx)
	h.tr = &traffic{o: h.o, cli: trafficCli, rec: h.rec}
	h.tr.start(tctx, h.o.Seed)
	if h.o.Faults > 0 {
		h.logf("soak: traffic runs; %d faults follow", h.o.Faults)
	} else {
		h.logf("soak: traffic runs; faults for %s", h.o.Duration)
	}

	deadline := time.Now().Add(h.o.Duration)
	more := func() bool {
		if h.o.Faults > 0 {
			return h.faults() < h.o.Faults
		}
		return time.Now().Before(deadline)
	}
	for more() && ctx.Err() == nil {
		gap := time.Duration(h.rnd.Int64N(int64(h.o.Gap)))
		select {
		case <-ctx.Done():
		case <-time.After(gap):
		}
		if err := h.oneFault(ctx); err != nil {
			stopTraffic()
			return err
		}
	}
	stopTraffic()
	h.tr.wait()
	h.report.Writes, h.report.Failed, h.report.Reads, h.report.Compactions = h.tr.writes.Load(), h.tr.failed.Load(), h.tr.reads.Load(), h.tr.compact.Load()
	h.logf("soak: faults done: %d writes acknowledged, %d failed; the checks at the end follow", h.report.Writes, h.report.Failed)
	return h.finish(ctx)
}

// bringUp starts the members, turns authentication on, starts the
// sidecars and waits for the first full snapshot.
func (h *harness) bringUp(ctx context.Context) error {
	for _, nd := range h.c.nodes {
		if err := h.c.startWrapper(nd); err != nil {
			return err
		}
	}
	if err := h.until(ctx, 2*time.Minute, "every member is healthy", func() bool { return h.allReady() || h.exited() != nil }); err != nil {
		return err
	}
	if err := h.exited(); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(h.dir, "logs"))
	}
	var err error
	if h.cli, err = h.c.client(); err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = h.c.enableAuth(actx, h.cli)
	cancel()
	if err != nil {
		return fmt.Errorf("enabling auth: %w", err)
	}
	// The client logged in before auth was on; a new one gets a token.
	_ = h.cli.Close()
	if h.cli, err = h.c.client(); err != nil {
		return err
	}
	for _, nd := range h.c.nodes {
		if err := h.c.startSidecar(nd); err != nil {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	st, err := h.cli.Status(sctx, h.c.nodes[0].client)
	cancel()
	if err != nil {
		return err
	}
	h.clusterID = st.Header.ClusterId
	h.trackDataDirs()
	err = h.until(ctx, 2*time.Minute, "the first full snapshot is on the store", func() bool {
		return h.head(ctx) > 0 || h.exited() != nil
	})
	if err == nil {
		err = h.exited()
	}
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(h.dir, "logs"))
	}
	return nil
}

// until polls cond until it holds or d passes.
func (h *harness) until(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %s for %s: %w", d, what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// exited names a process that exited by itself; the supervisor is not
// running yet when the cluster comes up.
func (h *harness) exited() error {
	for _, nd := range h.c.nodes {
		for _, p := range []*proc{nd.wrapperProc(), nd.sidecarProc()} {
			if p != nil {
				if err := p.exitedBadly(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (h *harness) allReady() bool {
	for _, nd := range h.c.nodes {
		if !h.c.healthy(nd) {
			return false
		}
	}
	return true
}

// unhealthy names the members whose /healthz fails, with its answer, and
// what each member says of its raft state: what a violation of recovery
// needs to be explained afterwards.
func (h *harness) unhealthy(ctx context.Context) string {
	var says []string
	for _, nd := range h.c.nodes {
		health := "healthy"
		if ok, why := h.c.health(nd); !ok {
			health = "unhealthy: " + why
		}
		// The recovery's own deadline has passed: a short one of its own.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		st, err := h.cli.Status(sctx, nd.client)
		cancel()
		state := fmt.Sprintf("status: %v", err)
		if err == nil {
			state = fmt.Sprintf("member %x leader %x term %d raft index %d applied %d learner %v errors %v",
				st.Header.MemberId, st.Leader, st.RaftTerm, st.RaftIndex, st.RaftAppliedIndex, st.IsLearner, st.Errors)
		}
		says = append(says, fmt.Sprintf("%s %s, %s", nd.name, health, state))
	}
	return strings.Join(says, "; ")
}

// head is the last revision of the store's newest chain; 0 when there is
// none or the store does not answer.
func (h *harness) head(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cat, err := snapshot.List(ctx, h.st)
	if err != nil {
		return 0
	}
	ch, err := cat.Latest()
	if err != nil {
		return 0
	}
	return ch.LastRevision()
}

func (h *harness) sampleHeads(ctx context.Context) {
	for ctx.Err() == nil {
		h.sampleHead(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sampleHead reads the store's head and keeps it as a sample of the RPO.
func (h *harness) sampleHead(ctx context.Context) int64 {
	hd := h.head(ctx)
	if hd > 0 {
		h.mu.Lock()
		h.heads = append(h.heads, headSample{at: time.Now(), head: hd})
		h.mu.Unlock()
	}
	return hd
}

// supervise restarts a process that exited by itself, as the kubelet
// restarts a container, and counts it.
func (h *harness) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		h.mu.Lock()
		for _, nd := range h.c.nodes {
			for _, p := range []*proc{nd.wrapperProc(), nd.sidecarProc()} {
				if p == nil || h.supervised[p] {
					continue
				}
				if err := p.exitedBadly(); err != nil {
					h.report.Restarts = append(h.report.Restarts, fmt.Sprintf("%s: %v", time.Since(h.start).Round(time.Millisecond), err))
					h.o.Logger.Warn("soak: " + err.Error() + "; restarted")
					if p == nd.wrapperProc() {
						_ = h.c.startWrapper(nd)
					} else {
						_ = h.c.startSidecar(nd)
					}
				}
			}
		}
		h.mu.Unlock()
	}
}

// onDemandFulls asks a random sidecar for a full snapshot now and then, as
// an operator does before a risky change; a follower's forwards it.
func (h *harness) onDemandFulls(ctx context.Context) {
	r := rand.New(rand.NewPCG(h.o.Seed, 3))
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(20*time.Second + time.Duration(r.IntN(20000))*time.Millisecond):
		}
		nd := h.c.nodes[r.IntN(len(h.c.nodes))]
		c := &api.Client{URL: nd.api, TLS: tlsfiles.Files{CA: h.c.ca.File, Cert: h.c.certs["operator"].CertFile, Key: h.c.certs["operator"].KeyFile}}
		fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_, err := c.Full(fctx)
		cancel()
		h.mu.Lock()
		if err == nil {
			h.report.OnDemandFulls++
		} else {
			h.report.OnDemandFullsFailed++
		}
		h.mu.Unlock()
	}
}

// leaderNode asks the members who leads; with no answer in 15 s (no
// quorum, processes stopped) it takes the first member.
func (h *harness) leaderNode(ctx context.Context) *node {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, nd := range h.c.nodes {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := h.cli.Status(sctx, nd.client)
			cancel()
			if err == nil && st.Leader == st.Header.MemberId {
				return nd
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return h.c.nodes[0]
}

func (h *harness) followerNode(ctx context.Context) *node {
	l := h.leaderNode(ctx)
	var fs []*node
	for _, nd := range h.c.nodes {
		if nd != l {
			fs = append(fs, nd)
		}
	}
	return fs[h.rnd.IntN(len(fs))]
}

func (h *harness) anyNode() *node { return h.c.nodes[h.rnd.IntN(len(h.c.nodes))] }

func (h *harness) moveLeader(ctx context.Context) error {
	l := h.leaderNode(ctx)
	to := h.followerNode(ctx)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := h.cli.Status(sctx, to.client)
	if err != nil {
		h.logf("soak: move-leader: %s does not answer: %v", to.name, err)
		return nil
	}
	lc, err := h.c.client(l.client)
	if err != nil {
		return err
	}
	defer func() { _ = lc.Close() }()
	if _, err := lc.MoveLeader(sctx, st.Header.MemberId); err != nil {
		h.logf("soak: move-leader %s → %s: %v", l.name, to.name, err)
	}
	return nil
}

// oneFault injects a fault, holds it, heals it and waits for the system
// to recover, checking what must hold meanwhile.
func (h *harness) oneFault(ctx context.Context) error {
	f, err := h.pick()
	if err != nil {
		return err
	}
	from := time.Now()
	h.logf("soak: fault %s", f.kind)
	h.markDown(true)
	heal, watch, err := f.inject(ctx, h)
	if err != nil {
		return fmt.Errorf("fault %s: %w", f.kind, err)
	}
	hold := time.Second + time.Duration(h.rnd.Int64N(int64(h.o.Hold)))
	if watch != nil {
		// What must report the fault has until the hold ends, and at least
		// the time it is given to notice, plus the delta period and the
		// seconds a store SDK retries before an attempt counts as failed.
		hold = max(hold, h.o.Sidecar.MaxBackupAge+6*time.Second)
	}
	reported := watch == nil
	end := time.Now().Add(hold)
	for time.Now().Before(end) && ctx.Err() == nil {
		if !reported && watch() {
			reported = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !reported {
		h.violation("%s: the fault was not reported while it lasted (%s)", f.kind, hold.Round(time.Millisecond))
	}
	if heal != nil {
		if err := heal(ctx); err != nil {
			return fmt.Errorf("healing %s: %w", f.kind, err)
		}
	}
	h.markDown(false)
	healed := time.Now()
	took, err := h.recover(ctx)
	h.mu.Lock()
	h.report.Faults[f.kind]++
	h.windows = append(h.windows, window{from: from, to: time.Now()})
	if took > h.report.WorstRecovery {
		h.report.WorstRecovery, h.report.WorstRecoveryAfter = took, f.kind
	}
	h.mu.Unlock()
	if err != nil {
		h.violation("%s: not back within %s of healing at %s: %v", f.kind, h.o.Recover, healed.Sub(h.start).Round(time.Millisecond), err)
		// Give it the time it takes, so the next fault meets a system that
		// runs; the violation is on record.
		if _, err := h.recover(ctx); err != nil {
			return fmt.Errorf("after %s the system did not come back at all: %w", f.kind, err)
		}
	}
	h.checkInvariants(ctx, f.kind)
	// Now and then a restore while the soak runs, of the newest chain.
	if h.faults()%4 == 0 {
		h.checkRestores(ctx, 1, 1, false)
	}
	return nil
}

// faults is how many faults were injected so far; the report is shared
// with the goroutines that check while the soak runs.
func (h *harness) faults() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.report.Faults {
		n += c
	}
	return n
}

// markDown tells the supervisor to leave the processes alone while a
// fault holds them down (killed or stopped on purpose).
func (h *harness) markDown(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.supervised {
		delete(h.supervised, k)
	}
	if on {
		for _, nd := range h.c.nodes {
			h.supervised[nd.wrapperProc()], h.supervised[nd.sidecarProc()] = true, true
		}
	}
}

// recover waits until every wrapper is ready, a write succeeds and the
// store's newest chain holds it, and says how long that took.
func (h *harness) recover(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, h.o.Recover)
	defer cancel()
	if err := h.until(rctx, h.o.Recover, "every member healthy", h.allReady); err != nil {
		return time.Since(start), fmt.Errorf("%w (%s)", err, h.unhealthy(ctx))
	}
	var rev int64
	if err := h.until(rctx, h.o.Recover, "a write", func() bool {
		pctx, c := context.WithTimeout(rctx, 5*time.Second)
		defer c()
		resp, err := h.cli.Put(pctx, "/soak/probe", time.Now().Format(time.RFC3339Nano))
		if err == nil {
			rev = resp.Header.Revision
		}
		return err == nil
	}); err != nil {
		return time.Since(start), err
	}
	err := h.until(rctx, h.o.Recover, fmt.Sprintf("the store's newest chain reaches revision %d", rev), func() bool {
		return h.head(rctx) >= rev
	})
	return time.Since(start), err
}

// checkInvariants runs after every recovery: one cluster, no data dir
// gone.
func (h *harness) checkInvariants(ctx context.Context, after string) {
	for _, nd := range h.c.nodes {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := h.cli.Status(sctx, nd.client)
		cancel()
		if err == nil && st.Header.ClusterId != h.clusterID {
			h.violation("after %s: %s is in cluster %x, the soak's is %x", after, nd.name, st.Header.ClusterId, h.clusterID)
		}
	}
	h.trackDataDirs()
}

// trackDataDirs remembers every data dir and moved-aside data dir of the
// members, and reports one that went away: etcdkit moves data dirs aside,
// it never deletes one (the soak keeps every moved-aside one).
func (h *harness) trackDataDirs() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for d := range h.dataDirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			h.report.Violations = append(h.report.Violations, fmt.Sprintf("%s: data dir %s was deleted", time.Since(h.start).Round(time.Millisecond), d))
			delete(h.dataDirs, d)
		}
	}
	for _, nd := range h.c.nodes {
		ms, _ := filepath.Glob(nd.dataDir + "*")
		for _, m := range ms {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() && !strings.Contains(m, ".tmp") {
				h.dataDirs[m] = true
			}
		}
	}
}

// forget stops tracking a data dir the harness itself took away.
func (h *harness) forget(dir string) {
	h.mu.Lock()
	delete(h.dataDirs, dir)
	h.mu.Unlock()
}

// rpo measures, for every acknowledged write, how long it took to be on
// the store, and reports those later than the promise: the RPO, counted
// from the write or from the recovery of a fault that held the backups
// back, whichever is later.
func (h *harness) rpo() {
	h.mu.Lock()
	heads := append([]headSample(nil), h.heads...)
	windows := append([]window(nil), h.windows...)
	h.mu.Unlock()
	h.rec.mu.Lock()
	acks := append([]ack(nil), h.rec.acks...)
	h.rec.mu.Unlock()
	sort.Slice(acks, func(i, j int) bool { return acks[i].at.Before(acks[j].at) })
	late := 0
	for _, a := range acks {
		// The first sample at or after the ack that holds its revision.
		i := sort.Search(len(heads), func(i int) bool { return !heads[i].at.Before(a.at) })
		for ; i < len(heads) && heads[i].head < a.rev; i++ {
		}
		deadline := a.at.Add(h.o.RPO)
		for _, w := range windows {
			if w.from.Before(deadline) && w.to.After(a.at) {
				deadline = later(deadline, w.to.Add(h.o.RPO))
			}
		}
		if i == len(heads) {
			late++
			if late <= 5 {
				h.violation("write of %q at revision %d (acknowledged %s) never reached the store", a.key, a.rev, a.at.Sub(h.start).Round(time.Millisecond))
			}
			continue
		}
		lag := heads[i].at.Sub(a.at)
		if lag > h.report.WorstRPO {
			h.report.WorstRPO = lag
		}
		if heads[i].at.After(deadline) {
			late++
			if late <= 5 {
				h.violation("write of %q at revision %d (acknowledged %s) reached the store %s later, past the RPO of %s",
					a.key, a.rev, a.at.Sub(h.start).Round(time.Millisecond), lag.Round(time.Millisecond), h.o.RPO)
			}
		}
	}
	h.report.LateWrites = late
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
