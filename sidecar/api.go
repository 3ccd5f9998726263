package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/view"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/internal/datadir"
	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/startup"
	"github.com/etcdkit/etcdkit/validate"
)

// Handler serves the API: health and metrics open, the rest behind auth's
// credential.
func (s *Sidecar) Handler(auth Auth) (http.Handler, error) {
	au, err := auth.authenticator(s.log)
	if err != nil {
		return nil, err
	}
	return s.handler(au), nil
}

func (s *Sidecar) handler(au *authenticator) *http.ServeMux {
	mux := http.NewServeMux()
	route := func(path, method string, open bool, h func(http.ResponseWriter, *http.Request) (any, int, error)) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method {
				w.Header().Set("Allow", method)
				writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s takes %s, not %s", r.URL.Path, method, r.Method))
				return
			}
			if !open {
				if err := au.check(r); err != nil {
					w.Header().Set("WWW-Authenticate", `Bearer realm="etcdkit"`)
					writeError(w, http.StatusUnauthorized, err)
					return
				}
			}
			body, code, err := h(w, r)
			if err != nil {
				writeError(w, code, err)
				return
			}
			if body != nil {
				writeJSON(w, code, body)
			}
		})
	}
	route("/healthz", http.MethodGet, true, func(http.ResponseWriter, *http.Request) (any, int, error) {
		return api.Health{Status: "ok"}, http.StatusOK, nil
	})
	route("/readyz", http.MethodGet, true, s.readyz)
	metrics := promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
	route("/metrics", http.MethodGet, true, func(w http.ResponseWriter, r *http.Request) (any, int, error) {
		metrics.ServeHTTP(w, r)
		return nil, 0, nil
	})
	route("/v1/snapshots", http.MethodGet, false, s.listSnapshots)
	route("/v1/snapshots/latest", http.MethodGet, false, s.latestSnapshot)
	route("/v1/snapshots/full", http.MethodPost, false, s.uploaderOnly(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		sn, err := s.Full(r.Context(), false)
		return view.SnapshotOf(sn), err
	}))
	route("/v1/snapshots/delta", http.MethodPost, false, s.uploaderOnly(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		sn, err := s.Delta(r.Context())
		return view.SnapshotOf(sn), err
	}))
	route("/v1/defrag", http.MethodPost, false, s.uploaderOnly(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req struct {
			DryRun bool `json:"dry_run"`
		}
		if err := decode(w, r, &req); err != nil {
			return nil, err
		}
		return s.Defrag(r.Context(), req.DryRun)
	}))
	route("/v1/compact", http.MethodPost, false, s.uploaderOnly(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		c, err := s.Compact(r.Context())
		return api.Compaction{Snapshot: view.SnapshotOf(c.Snapshot), Revisions: c.Revisions, InputBytes: c.InputBytes,
			OutputBytes: c.OutputBytes, TookSeconds: c.Took.Seconds(), Unchanged: c.Unchanged}, err
	}))
	route("/v1/validate", http.MethodPost, false, s.validateDataDir)
	route("/v1/restore", http.MethodPost, false, s.startRestore)
	mux.HandleFunc("/v1/restore/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s takes GET, not %s", r.URL.Path, r.Method))
			return
		}
		if err := au.check(r); err != nil {
			writeError(w, http.StatusUnauthorized, err)
			return
		}
		job, ok := s.jobs.get(r.PathValue("id"))
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Errorf("no restore job %q", r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, job)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s", r.URL.Path))
	})
	return mux
}

var (
	errBadRequest = errors.New("bad request")
	errTooLarge   = errors.New("request too large")
	errBusy       = errors.New("busy: the same operation is running")
)

// readBody reads a request body of at most api.MaxBody bytes: a longer one
// is refused whole, never cut and read as something else.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("%w: the body is over %d bytes", errTooLarge, tooLarge.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	return b, nil
}

// decode reads a JSON body strictly: one document, known fields; an
// empty body is the zero request.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: malformed JSON: %w", errBadRequest, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: more than one JSON document in the body", errBadRequest)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, api.ErrorBody{Error: err.Error()})
}

// status maps an operation's error to its HTTP status.
func status(err error) int {
	switch {
	case errors.Is(err, errBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBusy):
		return http.StatusConflict
	case errors.Is(err, capture.ErrNoEvents):
		return http.StatusConflict
	case errors.Is(err, ErrNotUploader), errors.Is(err, capture.ErrNotRunning):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrNoStore):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

func (s *Sidecar) readyz(_ http.ResponseWriter, _ *http.Request) (any, int, error) {
	self, err := s.Member()
	up := s.up.active()
	body := api.Readiness{Uploader: up, MemberID: fmt.Sprintf("%x", self.ID), Learner: self.Learner}
	if removed := s.Removed(); removed != "" && err != nil {
		// Waiting does not help: the member stays out.
		body.MemberRemoved, body.Error = removed, fmt.Sprintf("the member does not run (%v): it stays out: %s", err, removed)
		return body, http.StatusServiceUnavailable, nil
	}
	if err != nil || self.ID == 0 && !s.leaderless() {
		body.Error = fmt.Sprint(cmpErr(err, errors.New("the member has not answered yet")))
		return body, http.StatusServiceUnavailable, nil
	}
	body.Ready = true
	if !up || s.snap == nil {
		return body, http.StatusOK, nil
	}
	st := s.snap.Status()
	backup, failingFor := s.backupState(st)
	body.Uploading = &api.Uploading{Backup: backup, LastRevision: st.LastRevision, PendingEvents: st.PendingEvents, Failures: st.Failures}
	if s.second != nil {
		body.Secondary = s.second.state()
	}
	if s.writeOnce != nil {
		body.WriteOnce = s.writeOnce.current()
	}
	if st.Refused != "" {
		// Waiting does not help: not ready at once.
		body.Ready, body.Refused = false, string(st.Refused)
		body.Error = "the backups are refused: " + st.LastError
		return body, http.StatusServiceUnavailable, nil
	}
	if s.opts.Backups.RequireWriteOnce && body.WriteOnce != nil && body.WriteOnce.Error == "" && !body.WriteOnce.DeletesRefused {
		body.Ready = false
		body.Error = "the store deleted the probe " + body.WriteOnce.Probe + ": nothing locks the backups, and write-once is required (turn the bucket's lock on)"
		return body, http.StatusServiceUnavailable, nil
	}
	if failingFor > s.opts.Backups.MaxBackupAge {
		body.Ready = false
		body.Error = fmt.Sprintf("no backup has succeeded for %s (more than %s): %s", failingFor.Round(100*time.Millisecond), s.opts.Backups.MaxBackupAge, backup.LastError)
		return body, http.StatusServiceUnavailable, nil
	}
	return body, http.StatusOK, nil
}

// backupState is the uploader's backups as /readyz shows them, and how
// long they have not succeeded (0 while they do).
func (s *Sidecar) backupState(st capture.Status) (api.BackupState, time.Duration) {
	stoppedSince, stopErr := s.up.stopped()
	out := api.BackupState{State: "ok", ConsecutiveFailures: st.Failures}
	since, lastErr := st.FailingSince, st.LastError
	switch {
	case !stoppedSince.IsZero():
		out.State = "stopped"
		since, lastErr = stoppedSince, stopErr.Error()
	case st.Failures > 0:
		out.State = "failing"
	}
	if since.IsZero() {
		return out, 0
	}
	out.FailingSince, out.LastError = since.UTC(), lastErr
	failingFor := time.Since(since)
	out.FailingSeconds = failingFor.Seconds()
	return out, failingFor
}

func cmpErr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}

func (s *Sidecar) listSnapshots(_ http.ResponseWriter, r *http.Request) (any, int, error) {
	if s.snap == nil {
		return nil, http.StatusNotFound, ErrNoStore
	}
	cat, err := snapshot.List(r.Context(), s.opts.Backups.Store)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	chains := []api.ChainView{}
	for _, c := range cat.AllChains() {
		chains = append(chains, view.ChainOf(c))
	}
	return api.Snapshots{Chains: chains, Timelines: view.TimelinesOf(cat)}, http.StatusOK, nil
}

func (s *Sidecar) latestSnapshot(_ http.ResponseWriter, r *http.Request) (any, int, error) {
	if s.snap == nil {
		return nil, http.StatusNotFound, ErrNoStore
	}
	cat, err := snapshot.List(r.Context(), s.opts.Backups.Store)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	chain, err := cat.Latest()
	if errors.Is(err, snapshot.ErrNoFull) {
		return nil, http.StatusNotFound, err
	}
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	// The identity is not part of the answer: its record is not read.
	v := view.ChainOf(chain)
	body := api.Latest{Chain: v, LastRevision: v.LastRevision}
	if _, err := chain.Check(); err != nil {
		body.Problem = err.Error()
	}
	return body, http.StatusOK, nil
}

// uploaderOnly runs f here when this sidecar uploads, and forwards the
// call to the uploader's sidecar otherwise.
func (s *Sidecar) uploaderOnly(f func(http.ResponseWriter, *http.Request) (any, error)) func(http.ResponseWriter, *http.Request) (any, int, error) {
	return func(w http.ResponseWriter, r *http.Request) (any, int, error) {
		if s.Uploader() {
			body, err := f(w, r)
			if err != nil {
				return nil, status(err), err
			}
			return body, http.StatusOK, nil
		}
		if r.Header.Get(api.ForwardedHeader) != "" {
			return nil, http.StatusServiceUnavailable, fmt.Errorf("%w (forwarded here, leadership is moving)", ErrNotUploader)
		}
		if err := s.Forward(w, r); err != nil {
			return nil, http.StatusServiceUnavailable, err
		}
		return nil, 0, nil
	}
}

// Forward sends the call to the sidecar beside the leader and copies its
// answer back. It returns an error, having written nothing, when that
// sidecar cannot be found or reached.
func (s *Sidecar) Forward(w http.ResponseWriter, r *http.Request) error {
	self, _ := s.Member()
	leader := self.Leader
	if leader == 0 {
		return errors.New("no leader is known; try again")
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	list, err := s.opts.Client.MemberList(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("find the leader's sidecar: %w", err)
	}
	var name string
	var clientURLs []string
	for _, m := range list.Members {
		if m.ID == leader {
			name, clientURLs = m.Name, m.ClientURLs
		}
	}
	base, ok := s.opts.API.Peers[name]
	if !ok && s.opts.API.PeerOf != nil {
		base = s.opts.API.PeerOf(name, clientURLs)
		ok = base != ""
	}
	if !ok {
		return fmt.Errorf("the leader is member %q and no sidecar URL is configured for it (peers)", name)
	}
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, status(err), err)
		return nil
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimSuffix(base, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	req.Header.Set(api.ForwardedHeader, s.opts.Endpoint)
	resp, err := s.peerHTTP.Do(req)
	if explained := s.peers.Explain(err); explained != nil {
		err = explained
	}
	if err != nil {
		return fmt.Errorf("forward to the uploader's sidecar %s: %w", base, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set(api.ForwardedHeader, base)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return nil
}

func (s *Sidecar) startRestore(w http.ResponseWriter, r *http.Request) (any, int, error) {
	var req api.RestoreRequest
	if err := decode(w, r, &req); err != nil {
		return nil, status(err), err
	}
	if req.Revision < 0 {
		return nil, http.StatusBadRequest, fmt.Errorf("revision %d: a revision is positive (leave it out for the latest)", req.Revision)
	}
	if _, err := etcdVersion(req.EtcdVersion); err != nil {
		return nil, http.StatusBadRequest, err
	}
	if s.snap == nil && !req.IfNeeded {
		return nil, http.StatusNotFound, ErrNoStore
	}
	dir, code, err := s.restorable(req.DataDir)
	if err != nil {
		return nil, code, err
	}
	req.DataDir = dir
	if req.WALDir != "" {
		if req.WALDir, code, err = s.restorable(req.WALDir); err != nil {
			return nil, code, err
		}
	}
	if !req.IfNeeded {
		// Refused now rather than in the job: the caller is still there
		// to read why.
		release, err := datadir.Hold(dir, req.WALDir)
		if err != nil {
			return nil, http.StatusConflict, err
		}
		release()
	}
	job, running := s.jobs.start(req)
	if job == nil {
		return nil, http.StatusConflict, fmt.Errorf("restore job %s is already building %s", running, dir)
	}
	go s.runRestore(context.WithoutCancel(r.Context()), job.ID, req)
	return api.RestoreStarted{ID: job.ID, Status: "/v1/restore/" + job.ID}, http.StatusAccepted, nil
}

// restorable is dir, resolved, when this sidecar may build or judge it:
// an absolute path under its restore root.
func (s *Sidecar) restorable(dir string) (string, int, error) {
	if s.opts.API.RestoreRoot == "" {
		return "", http.StatusForbidden, errors.New("this sidecar prepares no data dirs: it has no restore root")
	}
	if !filepath.IsAbs(dir) {
		return "", http.StatusBadRequest, fmt.Errorf("%q: give an absolute path under %s", dir, s.opts.API.RestoreRoot)
	}
	real, err := underRoot(s.opts.API.RestoreRoot, dir)
	if err != nil {
		return "", http.StatusForbidden, err
	}
	return real, http.StatusOK, nil
}

// underRoot resolves dir, an absolute path, through every symlink of its
// existing part and returns it when it lies strictly under root (itself
// resolved): a link under the root that points outside it must not carry
// a restore, or the move aside of a data dir, out of it.
func underRoot(root, dir string) (string, error) {
	realRoot, err := resolve(root)
	if err != nil {
		return "", fmt.Errorf("restore root %s: %w", root, err)
	}
	real, err := resolve(dir)
	if err != nil {
		return "", fmt.Errorf("data_dir %s: %w", dir, err)
	}
	rel, err := filepath.Rel(realRoot, real)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		shown := real
		if real != dir {
			shown = fmt.Sprintf("%s (%s once its links are followed)", dir, real)
		}
		return "", fmt.Errorf("data_dir %s is outside the restore root %s", shown, root)
	}
	return real, nil
}

// resolve is path, absolute, with the symlinks of its longest existing
// prefix followed; the part that does not exist yet is kept as written.
func resolve(path string) (string, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(path)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(path)
		if parent == path {
			return "", err
		}
		rest = append([]string{filepath.Base(path)}, rest...)
		path = parent
	}
}

// source is how this sidecar prepares a data dir: in its own process,
// from its store.
func (s *Sidecar) source(progress func(restore.Progress)) *startup.Local {
	return &startup.Local{Store: s.opts.Backups.Store, Secondary: s.opts.Backups.Secondary, Codec: s.opts.Backups.Snapshots.Codec, KeepMovedAside: s.opts.API.KeepMovedAside,
		Progress: progress, Logger: s.log}
}

// validateDataDir answers POST /v1/validate: the facts a caller's start-up
// decides from, found here.
func (s *Sidecar) validateDataDir(w http.ResponseWriter, r *http.Request) (any, int, error) {
	var req api.ValidateRequest
	if err := decode(w, r, &req); err != nil {
		return nil, status(err), err
	}
	dir, code, err := s.restorable(req.DataDir)
	if err != nil {
		return nil, code, err
	}
	cfg := startup.Config{Member: member.Spec{DataDir: dir, Name: req.Name, Token: req.InitialClusterToken, InitialCluster: req.InitialCluster}, CleanShutdown: req.Sanity}
	if cfg.Etcd, err = etcdVersion(req.EtcdVersion); err != nil {
		return nil, http.StatusBadRequest, err
	}
	if req.WALDir != "" {
		if cfg.Member.WALDir, code, err = s.restorable(req.WALDir); err != nil {
			return nil, code, err
		}
	}
	chk, err := timedPreparer{s.source(nil), s}.Check(r.Context(), cfg)
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	v := api.Validation{Verdict: string(chk.Verdict), Reason: chk.Reason, Revision: chk.Revision,
		Backups: chk.Backups, BackupRevision: chk.BackupRevision}
	if chk.Verdict != validate.Empty {
		v.Release = chk.Release.Written().MinorString()
	}
	return v, http.StatusOK, nil
}

// runRestore runs the restore a job asks for. With IfNeeded it runs the
// start-up's decision first, and restores only when it says so; the
// membership actions it may decide are the caller's to carry out.
func (s *Sidecar) runRestore(ctx context.Context, id string, req api.RestoreRequest) {
	finish := func(f func(*api.Job)) {
		s.jobs.update(id, func(j *api.Job) {
			f(j)
			if j.State == api.JobRunning {
				j.State = api.JobSucceeded
			}
			j.Finished = time.Now().UTC()
		})
	}
	progress := func(p restore.Progress) {
		s.jobs.update(id, func(j *api.Job) {
			j.BytesDownloaded, j.BytesTotal, j.Replayed = p.BytesDownloaded, p.BytesTotal, p.Revisions
		})
	}
	start := time.Now()
	// startRestore checked it.
	release, _ := etcdVersion(req.EtcdVersion)
	if req.IfNeeded {
		src := s.source(progress)
		src.KeepRevision = req.KeepRevision
		cfg := startup.Config{Member: specOf(req.Member), Endpoints: req.Endpoints, Etcd: release}
		// A lone member's defaults, as a restore's.
		if cfg.Member.Name == "" {
			cfg.Member.Name = member.DefaultName
		}
		if len(cfg.Member.PeerURLs) == 0 {
			cfg.Member.PeerURLs = []string{member.DefaultPeerURL}
		}
		if cfg.Member.InitialCluster == "" {
			cfg.Member.InitialCluster = cfg.Member.Name + "=" + strings.Join(cfg.Member.PeerURLs, ","+cfg.Member.Name+"=")
		}
		// The start-up's own plan: its checks, its table and its waits.
		p, chk, err := startup.Assess(ctx, cfg, timedPreparer{src, s}, startup.Options{Conn: s.opts.Membership.Conn, KeepMovedAside: s.opts.API.KeepMovedAside, Logger: s.log})
		if chk.Verdict != "" {
			s.jobs.update(id, func(j *api.Job) { j.Verdict = string(chk.Verdict) })
		}
		if err != nil {
			finish(func(j *api.Job) { j.State, j.Error = api.JobFailed, err.Error() })
			return
		}
		s.jobs.update(id, func(j *api.Job) { j.Reason = p.Reason })
		switch p.Action {
		case startup.Restart, startup.Bootstrap:
			finish(func(j *api.Job) { j.Action = "none" })
			return
		case startup.Rejoin, startup.JoinAsLearner:
			// Membership is the caller's to change, from its own member.
			finish(func(j *api.Job) { j.Action = string(p.Action) })
			return
		case startup.Refuse:
			finish(func(j *api.Job) { j.State, j.Action, j.Error = api.JobFailed, string(p.Action), p.Reason })
			return
		}
		start = time.Now()
		res, err := src.Restore(ctx, cfg, p)
		s.restored(id, start, res.Revision, res.Revisions, res.RevisionBump, err)
		return
	}
	res, err := restore.Restore(ctx, s.opts.Backups.Store, restore.Options{Read: restore.ReadOptions{Target: restore.Target{Revision: req.Revision, Time: req.Time}, Secondary: s.opts.Backups.Secondary, Codec: s.opts.Backups.Snapshots.Codec,
		Logger: s.log, Progress: progress}, Member: specOf(req.Member), KeepMovedAside: s.opts.API.KeepMovedAside, RevisionBump: req.RevisionBump, SafeRevision: !req.KeepRevision, KeepRevision: req.KeepRevision, Release: release})
	s.restored(id, start, res.Revision, res.Revisions, res.RevisionBump, err)
}

// restored ends a restore job.
func (s *Sidecar) restored(id string, start time.Time, rev, revs int64, bump uint64, err error) {
	s.ran(Operation{Name: "restore", Took: time.Since(start), Err: err})
	s.jobs.update(id, func(j *api.Job) {
		j.State, j.Action, j.Revision, j.Revisions, j.RevisionBump = api.JobSucceeded, "restored", rev, revs, bump
		if err != nil {
			j.State, j.Action, j.Error = api.JobFailed, "", err.Error()
		}
		j.Finished = time.Now().UTC()
	})
}

// etcdVersion reads an API request's etcd release: zero when not given
// (the sidecar's own), an error naming the field when it does not parse
// or is not one etcdkit runs.
func etcdVersion(v string) (etcdversion.Version, error) {
	if v == "" {
		return etcdversion.Version{}, nil
	}
	e, err := etcdversion.Parse(v)
	if err == nil {
		err = etcdversion.CheckSupported(e)
	}
	if err != nil {
		return e, fmt.Errorf("etcd_version: %w", err)
	}
	return e, nil
}

// specOf is the member a request names.
func specOf(m api.Member) member.Spec {
	return member.Spec{Name: m.Name, DataDir: m.DataDir, WALDir: m.WALDir, PeerURLs: m.PeerURLs, InitialCluster: m.InitialCluster, Token: m.InitialClusterToken}
}
