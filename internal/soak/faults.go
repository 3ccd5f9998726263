package soak

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A fault breaks something and returns how to heal it (nil: nothing to
// heal). watch, when set, is what the system must report while the fault
// lasts: it is polled until it says so or the fault heals.
type fault struct {
	kind   string
	inject func(ctx context.Context, h *harness) (heal func(ctx context.Context) error, watch func() bool, err error)
}

// Kinds are the names of every fault the soak injects.
func Kinds() []string {
	var out []string
	for _, f := range faults() {
		out = append(out, f.kind)
	}
	return out
}

func faults() []fault {
	return []fault{
		{"kill-leader", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return h.killMember(h.leaderNode(ctx))
		}},
		{"kill-follower", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return h.killMember(h.followerNode(ctx))
		}},
		{"stop-leader", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return h.pause(h.leaderNode(ctx).wrapperProc())
		}},
		{"stop-follower", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return h.pause(h.followerNode(ctx).wrapperProc())
		}},
		{"kill-leader-sidecar", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return h.killSidecar(h.leaderNode(ctx))
		}},
		{"kill-follower-sidecar", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return h.killSidecar(h.followerNode(ctx))
		}},
		{"stop-leader-sidecar", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return h.pause(h.leaderNode(ctx).sidecarProc())
		}},
		{"stop-follower-sidecar", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return h.pause(h.followerNode(ctx).sidecarProc())
		}},
		{"move-leader", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return nil, nil, h.moveLeader(ctx)
		}},
		{"wipe-data-dir", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			nd := h.followerNode(ctx)
			nd.wrapperProc().kill()
			// A new disk: the old data dir is gone. The harness keeps it
			// for the post-mortem, outside anything etcdkit looks at.
			if err := os.Rename(nd.dataDir, filepath.Join(h.dir, "wiped", fmt.Sprintf("%s-%d", nd.name, time.Now().UnixNano()))); err != nil {
				return nil, nil, err
			}
			h.forget(nd.dataDir)
			return func(context.Context) error { return h.c.startWrapper(nd) }, nil, nil
		}},
		{"truncate-db", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			nd := h.followerNode(ctx)
			nd.wrapperProc().kill()
			db := filepath.Join(nd.dataDir, "member", "snap", "db")
			fi, err := os.Stat(db)
			if err != nil {
				return nil, nil, err
			}
			if err := os.Truncate(db, fi.Size()/2); err != nil {
				return nil, nil, err
			}
			return func(context.Context) error { return h.c.startWrapper(nd) }, nil, nil
		}},
		{"rolling-step", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			return nil, nil, h.rollingStep(ctx)
		}},
		{"partition", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			nd := h.anyNode()
			h.c.isolate(nd, true)
			// The isolated member cannot serve a linearizable read: its
			// wrapper's /healthz says so.
			return func(context.Context) error { h.c.isolate(nd, false); return nil },
				func() bool { return !h.c.healthy(nd) }, nil
		}},
		{"store-outage", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			h.c.store.set(storeOutage, 0)
			return h.healStore, h.backupsReportFailing(ctx), nil
		}},
		{"store-latency", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			h.c.store.set(storeLatency, time.Duration(500+h.rnd.IntN(2500))*time.Millisecond)
			return h.healStore, nil, nil
		}},
		{"store-errors", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			h.c.store.set(storeErrors, 0)
			return h.healStore, nil, nil
		}},
		{"spool-full", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			nd := h.leaderNode(ctx)
			filler := filepath.Join(nd.spool, "soak-filler")
			f, err := os.Create(filler)
			if err != nil {
				return nil, nil, err
			}
			// Write until the file system is full (ENOSPC ends it).
			buf := make([]byte, 1<<20)
			for werr := error(nil); werr == nil; {
				_, werr = f.Write(buf)
			}
			_ = f.Close()
			// A full spool fails fulls and compactions, not deltas (they
			// stay in memory): the backups keep up, nothing to report.
			return func(context.Context) error { return os.Remove(filler) }, nil, nil
		}},
		{"clock-jump", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			// The uploading sidecar's clock steps minutes to hours either
			// way, then steps back.
			nd := h.leaderNode(ctx)
			off := time.Duration(2+h.rnd.IntN(118)) * time.Minute
			if h.rnd.IntN(2) == 0 {
				off = -off
			}
			if err := os.WriteFile(nd.clockFile(), []byte(off.String()), 0o600); err != nil {
				return nil, nil, err
			}
			return func(context.Context) error { return os.WriteFile(nd.clockFile(), []byte("0s"), 0o600) }, nil, nil
		}},
		{"cluster-restart", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			errs := make(chan error, len(h.c.nodes))
			for _, nd := range h.c.nodes {
				go func() { errs <- nd.wrapperProc().stop(60 * time.Second) }()
			}
			for range h.c.nodes {
				if err := <-errs; err != nil {
					h.violation("cluster-restart: a wrapper did not stop cleanly on SIGTERM: %v", err)
				}
			}
			return h.startWrappers, nil, nil
		}},
		{"quorum-loss", func(ctx context.Context, h *harness) (func(context.Context) error, func() bool, error) {
			leader := h.leaderNode(ctx)
			other := h.followerNode(ctx)
			leader.wrapperProc().kill()
			other.wrapperProc().kill()
			return func(context.Context) error {
				if err := h.c.startWrapper(leader); err != nil {
					return err
				}
				return h.c.startWrapper(other)
			}, nil, nil
		}},
	}
}

func (h *harness) killMember(nd *node) (func(context.Context) error, func() bool, error) {
	nd.wrapperProc().kill()
	return func(context.Context) error { return h.c.startWrapper(nd) }, nil, nil
}

func (h *harness) killSidecar(nd *node) (func(context.Context) error, func() bool, error) {
	nd.sidecarProc().kill()
	return func(context.Context) error { return h.c.startSidecar(nd) }, nil, nil
}

// pause stops p, and the etcd it runs as its child (in a process group of
// its own): a stopped machine stops both.
func (h *harness) pause(p *proc) (func(context.Context) error, func() bool, error) {
	pids := append([]int{p.cmd.Process.Pid}, children(p.cmd.Process.Pid)...)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	return func(context.Context) error {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		return nil
	}, nil, nil
}

// children are the processes pid started (Linux: /proc).
func children(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// rollingStep swaps each member's wrapper in turn, as an image swap
// across a StatefulSet does: SIGTERM, then the wrapper of the embedded
// etcd on the same data dir, ready before the next member. Members still
// on StepFrom's etcd step to the embedded one; once none is, it is a
// rolling restart.
func (h *harness) rollingStep(ctx context.Context) error {
	for _, nd := range h.c.nodes {
		// oneFault keeps the supervisor off the wrappers stopped here.
		if err := nd.wrapperProc().stop(time.Minute); err != nil {
			return fmt.Errorf("%s's wrapper on SIGTERM: %w", nd.name, err)
		}
		nd.mu.Lock()
		from := cmp.Or(nd.etcd, "the embedded etcd")
		nd.etcd = ""
		nd.mu.Unlock()
		h.logf("soak: rolling-step: %s from %s to the embedded etcd", nd.name, from)
		if err := h.c.startWrapper(nd); err != nil {
			return err
		}
		if err := h.until(ctx, h.o.Recover, "every member is ready after "+nd.name+"'s step", h.allReady); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) healStore(context.Context) error {
	h.c.store.set(storePass, 0)
	return nil
}

func (h *harness) startWrappers(context.Context) error {
	for _, nd := range h.c.nodes {
		if err := h.c.startWrapper(nd); err != nil {
			return err
		}
	}
	return nil
}

// backupsReportFailing is true once the uploading sidecar's /readyz
// answers 503 (its backups have failed for longer than --max-backup-age)
// and its metrics count failed snapshots.
func (h *harness) backupsReportFailing(ctx context.Context) func() bool {
	nd := h.leaderNode(ctx)
	before, _ := h.c.metric(nd, "etcdkit_snapshot_failures_total")
	return func() bool {
		code, err := h.c.sidecarReady(nd)
		if err != nil || code != http.StatusServiceUnavailable {
			return false
		}
		now, err := h.c.metric(nd, "etcdkit_snapshot_failures_total")
		return err == nil && now > before
	}
}

// pick takes the faults in rounds: every kind once per round, in an order
// the seed shuffles, so a short soak meets every kind and a long one meets
// each as often.
func (h *harness) pick() (fault, error) {
	if len(h.round) == 0 {
		h.round = slices.Clone(h.o.Kinds)
		h.rnd.Shuffle(len(h.round), func(i, j int) { h.round[i], h.round[j] = h.round[j], h.round[i] })
	}
	k := h.round[0]
	h.round = h.round[1:]
	all := faults()
	i := slices.IndexFunc(all, func(f fault) bool { return f.kind == k })
	if i < 0 {
		return fault{}, fmt.Errorf("no fault of kind %q (the kinds: %s)", k, strings.Join(Kinds(), ", "))
	}
	return all[i], nil
}
