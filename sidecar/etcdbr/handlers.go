package etcdbr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/sidecar/etcdbr/etcdbrapi"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/upgrade"
)

// The handlers answer as etcd-backup-restore's do: a status code, then the
// body (JSON or plain text) with the content type Go sniffs from it, and an
// empty body on every error. Its clients read the code and the body only.

// startInitialization starts the start-up procedure, once at a time:
// validation mode "sanity" after a clean shutdown, "full" otherwise.
func (s *Server) startInitialization(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == etcdbrapi.StateNew {
		s.state = etcdbrapi.StateProgress
		sanity := r.URL.Query().Get("mode") == etcdbrapi.Sanity
		ctx := s.ctx
		if ctx == nil {
			// Handler mounted without Serve: the request starts it.
			ctx = context.WithoutCancel(r.Context())
		}
		go s.initialize(ctx, sanity)
	}
	w.WriteHeader(http.StatusOK)
}

// initTimeout bounds one initialization: the start-up's own waits (a
// join waits up to 5 min for the first member) with room for a restore.
const initTimeout = 30 * time.Minute

// initialize runs the start-up procedure and records its outcome for the
// status and /config. One that does not end in time is Failed, and the
// wrapper asks again.
func (s *Server) initialize(ctx context.Context, sanity bool) {
	p, err := s.Initialize(ctx, sanity)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.state = etcdbrapi.StateFailed
		return
	}
	s.state, s.plan = etcdbrapi.StateSuccessful, &p
}

// Initialize runs the start-up procedure once, as etcd-backup-restore's
// initialize command does (and /initialization/start through it): the
// data dir is validated (sanity: etcd shut down cleanly, so the quicker
// check), restored when the plan says so, and the membership changes the
// plan makes are carried out. It is bounded by 30 minutes.
func (s *Server) Initialize(ctx context.Context, sanity bool) (startup.Plan, error) {
	ctx, cancel := context.WithTimeout(ctx, initTimeout)
	defer cancel()
	start := time.Now()
	cfg := s.startupConfig(sanity)
	s.log.Info("etcdbr: initializing the data dir", "member", cfg.Member.Name, "data_dir", cfg.Member.DataDir, "sanity", sanity)
	p, err := s.sc.Prepare(ctx, cfg, s.cfg.Startup)
	s.m.initialized(p, time.Since(start), err)
	if err != nil {
		s.log.Error("etcdbr: initialization failed", "error", err)
		return p, err
	}
	s.log.Info("etcdbr: initialized", "action", p.Action, "reason", p.Reason)
	return p, nil
}

// initializationStatus writes the state, and starts over after a final
// one: etcd-backup-restore's clients read a final state once.
func (s *Server) initializationStatus(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(s.state))
	if s.state == etcdbrapi.StateSuccessful || s.state == etcdbrapi.StateFailed {
		s.state = etcdbrapi.StateNew
	}
}

// uploaderOnly runs h when this sidecar uploads, and forwards the call to
// the uploader's sidecar otherwise: 405 when that is not possible.
func (s *Server) uploaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.sc.HasStore() {
			// etcd-backup-restore without a storage provider: no
			// snapshotter, here or on the leader.
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if s.sc.Uploader() {
			h(w, r)
			return
		}
		if r.Header.Get(api.ForwardedHeader) != "" {
			s.log.Warn("etcdbr: a forwarded snapshot call reached a sidecar that does not upload (leadership is moving)", "path", r.URL.Path)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if err := s.sc.Forward(w, r); err != nil {
			s.log.Warn("etcdbr: forward to the uploader's sidecar", "path", r.URL.Path, "error", err)
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}
}

func (s *Server) fullSnapshot(w http.ResponseWriter, r *http.Request) {
	final := false
	if v := r.URL.Query().Get("final"); v != "" {
		var err error
		if final, err = strconv.ParseBool(v); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
	}
	sn, err := s.sc.Full(r.Context(), final)
	if err != nil {
		s.log.Warn("etcdbr: out-of-schedule full snapshot", "error", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	writeJSON(w, taken(sn))
}

func (s *Server) deltaSnapshot(w http.ResponseWriter, r *http.Request) {
	sn, err := s.sc.Delta(r.Context())
	switch {
	case errors.Is(err, capture.ErrNoEvents):
		// Nothing to upload: etcd-backup-restore answers a null snapshot.
		writeJSON(w, (*brSnapshot)(nil))
	case err != nil:
		s.log.Warn("etcdbr: out-of-schedule delta snapshot", "error", err)
		w.WriteHeader(http.StatusInternalServerError)
	default:
		writeJSON(w, taken(sn))
	}
}

// latestSnapshots lists the latest full snapshot and the deltas after it.
func (s *Server) latestSnapshots(w http.ResponseWriter, r *http.Request) {
	cat, err := snapshot.List(r.Context(), s.st)
	if err != nil {
		s.log.Warn("etcdbr: list the store", "error", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	resp := struct {
		FullSnapshot   *brSnapshot   `json:"fullSnapshot"`
		DeltaSnapshots []*brSnapshot `json:"deltaSnapshots"`
	}{}
	chain, err := cat.Latest()
	if err != nil {
		// No full snapshot: the deltas there are, after none.
		chain = snapshot.Chain{}
		for _, sn := range cat.Snapshots {
			if sn.Kind == snapshot.KindDelta {
				chain.Deltas = append(chain.Deltas, sn)
			}
		}
	} else {
		resp.FullSnapshot = s.listed(chain.Full)
	}
	for _, d := range chain.Deltas {
		resp.DeltaSnapshots = append(resp.DeltaSnapshots, s.listed(d))
	}
	s.m.chain(chain)
	writeJSON(w, resp)
}

// healthz is etcd-backup-restore's: 200 and {"health":true} on the
// sidecar that uploads while its snapshots succeed (or, with no store,
// beside the leader), 503 and false elsewhere (a follower's sidecar, a
// sidecar whose backups fail).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	st := s.sc.SnapshotStatus()
	healthy := s.sc.Uploader() && (!s.sc.HasStore() || st.Running && st.Failures == 0)
	code := http.StatusServiceUnavailable
	if healthy {
		code = http.StatusOK
	}
	w.WriteHeader(code)
	b, _ := json.Marshal(struct {
		Health bool `json:"health"`
	}{healthy})
	_, _ = w.Write(b)
}

// config serves the member's etcd configuration: the start-up's initial
// cluster and state once it ran, and else what the cluster says now.
func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p := s.plan
	s.mu.Unlock()
	var cluster, state string
	if p != nil && p.InitialCluster != "" {
		cluster, state = p.InitialCluster, p.ClusterState
	} else {
		cluster, state = s.clusterNow(r.Context())
	}
	data, err := s.cfg.EtcdConf.Render(s.self, cluster, state)
	if err != nil {
		s.log.Warn("etcdbr: render the etcd config", "error", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	http.ServeContent(w, r, "etcd.conf.yaml", time.Now(), bytes.NewReader(data))
	s.log.Info("etcdbr: served the etcd config", "initial_cluster", cluster, "state", state)
}

// clusterNow is etcd-backup-restore's answer without a start-up: a lone
// member bootstraps; in a cluster of several, the initial cluster lists
// the running members and this one, and the state is "existing" while a
// learner waits to start.
func (s *Server) clusterNow(ctx context.Context) (string, string) {
	conf := s.cfg.EtcdConf
	if ClusterSize(conf.InitialCluster) == 1 {
		return conf.InitialCluster, clusterNew
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cli, err := s.conn(ctx, s.endpoints())
	if err != nil {
		s.log.Warn("etcdbr: ask the cluster for /config", "error", err)
		return conf.InitialCluster, clusterNew
	}
	defer func() { _ = cli.Close() }()
	list, err := cli.MemberList(ctx)
	if err != nil || len(list.Members) <= 1 {
		return conf.InitialCluster, clusterNew
	}
	names, learner := map[string]bool{s.self.Name: true}, false
	for _, m := range list.Members {
		names[m.Name] = true
		learner = learner || m.IsLearner
	}
	var parts []string
	for part := range strings.SplitSeq(conf.InitialCluster, ",") {
		if name, _, _ := strings.Cut(part, "="); names[name] {
			parts = append(parts, part)
		}
	}
	state := clusterNew
	if learner {
		state = clusterExisting
	}
	return strings.Join(parts, ","), state
}

// upgradeCheck serves upgrade.Live's verdict on the cluster for an
// orchestrator's upgrade gate (etcd-druid's step from 3.5 to 3.6): 200
// when safe, 409 with something to fix first, 503 when not everything
// could be checked, 429 while another check runs; the report is the body.
// ?to=3.6 names the release to step to (default the next minor; one down
// checks the step through etcd's downgrade API); 400 for one that is not
// a release.
func (s *Server) upgradeCheck(w http.ResponseWriter, r *http.Request) {
	// One at a time: each streams the member's database, and the protocol
	// has no credential to keep callers out.
	if !s.upgrading.TryLock() {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	defer s.upgrading.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), upgradeCheckTimeout)
	defer cancel()
	var o upgrade.Options
	if s.cfg.EtcdConf.File() {
		o = upgrade.ConfigOptions(s.cfg.EtcdConf.raw)
	}
	if to := r.URL.Query().Get("to"); to != "" {
		v, err := etcdversion.Parse(to)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, "to=%s: %v\n", to, err)
			return
		}
		o.To = v
	}
	rep, err := upgrade.Live(ctx, s.cli, upgrade.LiveOptions{Step: o, WorkDir: s.cfg.WorkDir})
	if err != nil {
		s.log.Warn("etcdbr: upgrade check", "error", err)
		rep = upgrade.Report{Source: s.endpoint, Verdict: upgrade.Unknown,
			Findings: []upgrade.Finding{{Check: "cluster", Status: upgrade.Unread, Subject: s.endpoint, Detail: err.Error()}}}
	}
	code := map[upgrade.Verdict]int{upgrade.Safe: http.StatusOK, upgrade.FixFirst: http.StatusConflict}[rep.Verdict]
	if code == 0 {
		code = http.StatusServiceUnavailable
	}
	b, err := json.Marshal(rep)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// upgradeCheckTimeout bounds /upgrade/check: it streams the member's
// database.
const upgradeCheckTimeout = 10 * time.Minute

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// brSnapshot is a snapshot as etcd-backup-restore's JSON shows it.
type brSnapshot struct {
	CreatedOn time.Time `json:"createdOn"`
	// The misspelt key is etcd-backup-restore's.
	ImmutabilityExpiryTime time.Time `json:"immutabilityExpriyTime"`
	VersionID              *string   `json:"versionID"`
	Kind                   string    `json:"kind"`
	SnapDir                string    `json:"snapDir"`
	SnapName               string    `json:"snapName"`
	Prefix                 string    `json:"prefix"`
	CompressionSuffix      string    `json:"compressionSuffix"`
	StartRevision          int64     `json:"startRevision"`
	LastRevision           int64     `json:"lastRevision"`
	IsChunk                bool      `json:"isChunk"`
	IsFinal                bool      `json:"isFinal"`
}

// taken shows a snapshot just taken: etcd-backup-restore leaves its
// prefix empty.
func taken(sn snapshot.Snapshot) *brSnapshot {
	return &brSnapshot{
		CreatedOn: sn.Created.UTC(), Kind: string(sn.Kind), SnapName: path.Base(sn.Key),
		CompressionSuffix: sn.Compression.Suffix(), StartRevision: sn.StartRevision, LastRevision: sn.LastRevision,
		IsFinal: sn.Final,
	}
}

// listed shows a snapshot read from the store, with the prefix up to its
// layout directory.
func (s *Server) listed(sn snapshot.Snapshot) *brSnapshot {
	b := taken(sn)
	dir := path.Dir(sn.Key)
	if s.cfg.StorePrefix != "" {
		dir = path.Join(s.cfg.StorePrefix, dir)
	}
	b.Prefix = dir + "/"
	return b
}
