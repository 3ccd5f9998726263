package soak

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// checkObjects reads every snapshot object the store lists, once, while
// the soak runs: each must be whole (its compression ends, its SHA-256
// trailer matches), since nothing partial may ever be listed.
func (h *harness) checkObjects(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		h.checkNewObjects(ctx)
	}
}

func (h *harness) checkNewObjects(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	objs, err := h.st.List(lctx, "")
	if err != nil {
		return
	}
	for _, o := range objs {
		h.mu.Lock()
		done := h.checked[o.Key]
		h.mu.Unlock()
		if done || !snapshotObject(o.Key) {
			continue
		}
		err := h.checkObject(lctx, o.Key)
		if ctx.Err() != nil || lctx.Err() != nil {
			return
		}
		if err != nil && h.stillListed(lctx, o.Key) {
			h.violation("store object %s is listed but not whole: %v", o.Key, err)
		}
		h.mu.Lock()
		h.checked[o.Key] = true
		h.report.ObjectsChecked++
		h.mu.Unlock()
	}
}

// snapshotObject says whether key is a full or a delta of the v2 layout
// (the store also holds etcdkit's identity and timeline records).
func snapshotObject(key string) bool {
	if !strings.HasPrefix(key, "v2/") && !strings.Contains(key, "/v2/") {
		return false
	}
	base := path.Base(key)
	return strings.HasPrefix(base, "Full-") || strings.HasPrefix(base, "Incr-")
}

// stillListed tells a broken object from one retention deleted while it
// was read.
func (h *harness) stillListed(ctx context.Context, key string) bool {
	objs, err := h.st.List(ctx, key)
	return err != nil || slices.ContainsFunc(objs, func(o store.Object) bool { return o.Key == key })
}

func (h *harness) checkObject(ctx context.Context, key string) error {
	rc, err := h.st.Get(ctx, key)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	var r io.Reader = rc
	switch {
	case strings.Contains(key, ".gz"):
		gz, err := gzip.NewReader(rc)
		if err != nil {
			return err
		}
		r = gz
	case strings.Contains(key, ".zst"):
		zr, err := zstd.NewReader(rc)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(b) < sha256.Size {
		return fmt.Errorf("%d bytes, shorter than its checksum", len(b))
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return fmt.Errorf("its SHA-256 trailer does not match its %d bytes", len(body))
	}
	if strings.HasPrefix(path.Base(key), "Incr-") {
		var events []json.RawMessage
		if err := json.Unmarshal(body, &events); err != nil {
			return fmt.Errorf("a delta that is not a JSON array: %w", err)
		}
	}
	return nil
}

// finish heals everything, waits until the backups hold the last write,
// and runs the checks of the end: every acknowledged write and read
// against the record, the RPO, restores at random revisions and times,
// the warm standby, one cluster and one timeline, the data dirs.
func (h *harness) finish(ctx context.Context) error {
	h.c.store.set(storePass, 0)
	for _, nd := range h.c.nodes {
		h.c.isolate(nd, false)
	}
	if _, err := h.recover(ctx); err != nil {
		h.violation("at the end: not back within %s: %v", h.o.Recover, err)
	}
	last, err := h.lastRevision(ctx)
	if err != nil {
		return err
	}
	// The heads seen while waiting are samples of the RPO too: the
	// sampler stopped with the traffic, and the last writes reach the store
	// after it (a CI run found them "never" there).
	if err := h.until(ctx, h.o.RPO+h.o.Recover, fmt.Sprintf("the backups reach revision %d", last), func() bool { return h.sampleHead(ctx) >= last }); err != nil {
		h.violation("at the end the store's newest chain ends at %d, the cluster's last revision is %d: %v", h.head(ctx), last, err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = h.rec.reach(rctx, last)
	cancel()
	if err != nil {
		return err
	}
	h.checkNewObjects(ctx)
	n, bad := h.rec.checkAcks()
	h.report.AcksChecked = n
	for _, b := range bad {
		h.violation("%s", b)
	}
	h.rpo()
	h.checkRestores(ctx, h.o.Restores, 2, true)
	h.checkStandby(ctx)
	h.checkTimelines(ctx)
	h.checkBootstraps()
	h.trackDataDirs()
	return nil
}

func (h *harness) lastRevision(ctx context.Context) (int64, error) {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := h.cli.Get(gctx, "/soak/probe")
	if err != nil {
		return 0, fmt.Errorf("the cluster's revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// checkRestores restores the store n times with etcd-backup restore, at
// chain fulls, revisions inside chains and times (the latest revision
// first, withLatest), and compares each data dir with the record. Targets
// are on the newest chains: retention deletes the older ones meanwhile.
func (h *harness) checkRestores(ctx context.Context, n, newest int, withLatest bool) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cat, err := snapshot.List(lctx, h.st)
	cancel()
	if err != nil {
		h.violation("listing the store: %v", err)
		return
	}
	chains := cat.Chains()
	if len(chains) == 0 {
		h.violation("no chain on the store")
		return
	}
	type target struct {
		what string
		args []string
	}
	latest := chains[len(chains)-1]
	var targets []target
	if withLatest {
		targets = append(targets, target{"the latest", []string{"--revision", fmt.Sprint(latest.LastRevision())}})
	}
	for i := h.rnd.IntN(3); len(targets) < n; i++ {
		ch := chains[len(chains)-1-h.rnd.IntN(min(len(chains), newest))]
		from, to := ch.Full.LastRevision, ch.LastRevision()
		switch i % 3 {
		case 0:
			targets = append(targets, target{"a chain's full", []string{"--revision", fmt.Sprint(from)}})
		case 1:
			rev := from + h.rnd.Int64N(to-from+1)
			targets = append(targets, target{"a revision inside a chain", []string{"--revision", fmt.Sprint(rev)}})
		case 2:
			// A time between the chain's full and now, at a second's
			// precision as an operator types it. (A full named under a
			// clock stepped ahead is in the future.)
			at := ch.Full.Created
			if span := time.Since(at); span > 0 {
				at = at.Add(time.Duration(h.rnd.Int64N(int64(span))))
			}
			targets = append(targets, target{"a time", []string{"--time", at.Truncate(time.Second).UTC().Format(time.RFC3339)}})
		}
	}
	for _, tg := range targets[:n] {
		h.mu.Lock()
		h.report.Restores++
		name := fmt.Sprintf("r%d", h.report.Restores)
		h.mu.Unlock()
		rev, err := h.restoreAndCompare(ctx, name, tg.args)
		if err != nil {
			h.violation("restore of %s (%s): %v", tg.what, strings.Join(tg.args, " "), err)
			continue
		}
		h.logf("soak: restore of %s (%s) at revision %d equals the record", tg.what, strings.Join(tg.args, " "), rev)
	}
}

// restoreAndCompare runs etcd-backup restore into a new data dir and
// compares it with the record at the revision it restored, which it
// keeps.
func (h *harness) restoreAndCompare(ctx context.Context, name string, target []string) (int64, error) {
	dir := filepath.Join(h.dir, "restores", name)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	args := append([]string{"restore", "--store", h.o.DirectStoreURL, "--data-dir", dir, "--name", name,
		"--peer-urls", "http://127.0.0.1:1", "--revision-bump", "0", "-o", "json"}, target...)
	cmd := exec.CommandContext(ctx, h.o.BackupBin, args...)
	cmd.Env = append(os.Environ(), h.o.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("etcd-backup %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var res struct {
		Revision int64 `json:"revision"`
		Bump     int64 `json:"revision_bump"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("etcd-backup restore printed %q: %w", out, err)
	}
	if err := h.compare(dir, res.Revision); err != nil {
		return res.Revision, err
	}
	// Equal to the record: nothing to look at later.
	return res.Revision, os.RemoveAll(dir)
}

// compare checks a data dir against the record at rev: the same keys with
// the same values, revisions, versions and leases; every lease a key has
// is there with the TTL it was granted; the users and auth are on.
func (h *harness) compare(dir string, rev int64) error {
	got, err := readDataDir(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.rec.reach(ctx, rev); err != nil {
		return err
	}
	want := h.rec.stateAt(rev)
	var diffs []string
	for k, w := range want {
		g, ok := got.keys[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%q missing (want %v)", k, w))
		case g != w:
			diffs = append(diffs, fmt.Sprintf("%q is %v, want %v", k, g, w))
		}
	}
	for k, g := range got.keys {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q is there (%v), the record has no such key at %d", k, g, rev))
		}
	}
	for k, g := range got.keys {
		if g.ls == 0 {
			continue
		}
		ttl, ok := got.leases[g.ls]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%q has lease %x, which is not in the data dir", k, g.ls))
			continue
		}
		// A lease has the TTL it was granted; one the backups saw only
		// after it was gone has the shortest (its keys went soon after).
		// None may keep its keys longer than it was granted.
		granted, known := h.rec.leaseTTL(g.ls)
		switch {
		case !known || ttl == granted:
		case ttl == 1:
			h.mu.Lock()
			h.report.LeasesShortened++
			h.mu.Unlock()
		default:
			diffs = append(diffs, fmt.Sprintf("lease %x of %q has TTL %d s, it was granted %d s", g.ls, k, ttl, granted))
		}
	}
	if !slices.Equal(got.users, []string{"backup", "etcd-wrapper", "root"}) || !got.authOn {
		diffs = append(diffs, fmt.Sprintf("users %v, auth on %v; want backup, etcd-wrapper, root and auth on", got.users, got.authOn))
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("and %d more", len(diffs)-10))
		}
		return fmt.Errorf("data dir %s at revision %d differs from the record (%d keys there, %d in the record):\n  %s",
			dir, rev, len(got.keys), len(want), strings.Join(diffs, "\n  "))
	}
	h.mu.Lock()
	h.report.KeysCompared += len(want)
	h.mu.Unlock()
	return nil
}

// checkStandby stops the sidecar that keeps the warm standby: it makes
// the standby a data dir at exit, which must equal the record at its
// revision.
func (h *harness) checkStandby(ctx context.Context) {
	for _, nd := range h.c.nodes {
		if nd.standby == "" {
			continue
		}
		h.markDown(true)
		err := nd.sidecarProc().stop(2 * time.Minute)
		if err != nil {
			h.violation("the standby's sidecar %s did not stop cleanly: %v", nd.name, err)
		}
		got, err := readDataDir(nd.standby)
		if err != nil {
			h.violation("the warm standby of %s: %v", nd.name, err)
			continue
		}
		if err := h.compare(nd.standby, got.rev); err != nil {
			h.violation("the warm standby of %s: %v", nd.name, err)
		} else {
			h.mu.Lock()
			h.report.Restores++
			h.mu.Unlock()
			h.logf("soak: the warm standby of %s at revision %d equals the record", nd.name, got.rev)
		}
	}
}

// checkTimelines: the soak never restores the cluster, so the store must
// hold one timeline.
func (h *harness) checkTimelines(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cat, err := snapshot.List(lctx, h.st)
	if err != nil {
		h.violation("listing the store: %v", err)
		return
	}
	if len(cat.Timelines) != 1 {
		var why []string
		for _, t := range cat.Timelines[1:] {
			why = append(why, fmt.Sprintf("%s: %s", t, t.Reason))
		}
		h.violation("the store holds %d timelines, the soak made one cluster: %s", len(cat.Timelines), strings.Join(why, "; "))
	}
}

// checkBootstraps reads the wrappers' logs: each member bootstraps once,
// at the first start; after that only restarts and rejoins.
func (h *harness) checkBootstraps() {
	for _, nd := range h.c.nodes {
		b, err := os.ReadFile(filepath.Join(h.dir, "logs", nd.name+"-wrapper.log"))
		if err != nil {
			h.violation("%s's wrapper log: %v", nd.name, err)
			continue
		}
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "startup: decided") && strings.Contains(line, "action=bootstrap") {
				n++
			}
		}
		if n != 1 {
			h.violation("%s bootstrapped %d times (once is right)", nd.name, n)
		}
	}
}
