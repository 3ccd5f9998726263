package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/capture"
	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// fullBench takes full snapshots of one database to the file store, in a
// child process so its peak RSS is its own, against etcdctl snapshot save
// of the same database.
func fullBench(ctx context.Context, cfg config) ([]row, error) {
	etcdctl, _, err := etcdTools(ctx, cfg.dir)
	if err != nil {
		return nil, err
	}
	m, err := startMember(filepath.Join(cfg.dir, "etcd-full"))
	if err != nil {
		return nil, err
	}
	defer m.close()
	fmt.Fprintf(os.Stderr, "bench: writing a %d MiB database ...\n", cfg.dbMiB)
	if err := fill(ctx, m.cli, int64(cfg.dbMiB)<<20); err != nil {
		return nil, err
	}
	storeDir := filepath.Join(cfg.dir, "store")
	spool := filepath.Join(cfg.dir, "spool")
	for _, d := range []string{storeDir, spool} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	var rows []row
	for _, comp := range []string{"none", "gzip", "zstd"} {
		r, _, err := fullRow(ctx, cfg, m, etcdctl, storeDir, spool, comp, false)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// fullRow takes cfg.runs full snapshots of m in comp, each in a child,
// alternating with etcdctl snapshot save of m into cfg.dir/etcdctl.db. With
// keep, the last run's object stays in the store and is returned.
func fullRow(ctx context.Context, cfg config, m *embedded, etcdctl, storeDir, spool, comp string, keep bool) (row, fullResult, error) {
	var refRSS int64
	ref := func() error {
		cmd := exec.CommandContext(ctx, etcdctl, "--endpoints", m.endpoint, "snapshot", "save", filepath.Join(cfg.dir, "etcdctl.db"))
		out, rss, err := runWatchingMemory(cmd)
		if err != nil {
			return fmt.Errorf("etcdctl snapshot save: %w\n%s", err, out)
		}
		refRSS = max(refRSS, rss.Peak)
		return nil
	}
	var kept fullResult
	var object, rss, dbBytes int64
	var o, r []time.Duration
	for i := range cfg.runs {
		var out fullResult
		syscall.Sync()
		if err := runChild(ctx, &out, "full", "-endpoint", m.endpoint, "-store", storeDir, "-spool", spool, "-compression", comp); err != nil {
			return row{}, kept, err
		}
		o = append(o, out.Took)
		object, rss, dbBytes = out.Size, max(rss, out.PeakRSS), out.DBBytes
		// Each run writes a new object; only the disk's room is kept.
		if keep && i == cfg.runs-1 {
			kept = out
		} else if err := os.Remove(filepath.Join(storeDir, out.Key)); err != nil {
			return row{}, kept, err
		}
		syscall.Sync()
		start := time.Now()
		if err := ref(); err != nil {
			return row{}, kept, err
		}
		r = append(r, time.Since(start))
	}
	note := fmt.Sprintf("object %d MiB; peak RSS %d MiB (etcdctl %d MiB)", object>>20, rss>>20, refRSS>>20)
	if comp == "none" {
		// etcdctl does not check etcd's trailer; Full does, and on a
		// small machine that is CPU the stream competes for.
		took, err := hashFile(filepath.Join(cfg.dir, "etcdctl.db"))
		if err != nil {
			return row{}, kept, err
		}
		note += fmt.Sprintf("; SHA-256 of the database alone: %.2fs", took.Seconds())
	}
	return row{
		Subject: "full snapshot (" + comp + ")", Op: "etcd → file://", Bytes: dbBytes,
		Ours: median(o), Reference: "etcdctl snapshot save", Ref: median(r), Note: note,
	}, kept, nil
}

// fullResult is what the child reports. Took times capture.Full alone:
// the bench binary links every store SDK and etcd's server, so its start
// is no part of a snapshot.
// hashFile times SHA-256 over a file that is in the page cache.
func hashFile(path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	if _, err := io.Copy(io.Discard, f); err != nil { // into the page cache
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := io.Copy(sha256.New(), f); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

type fullResult struct {
	Key     string
	Size    int64
	DBBytes int64
	PeakRSS int64
	Took    time.Duration
}

// childFull is the child process of fullBench.
func childFull(ctx context.Context, args []string) (any, error) {
	fs := flag.NewFlagSet("full", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "")
	dir := fs.String("store", "", "")
	spool := fs.String("spool", "", "")
	comp := fs.String("compression", "", "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	cli, st, err := childClientStore(*endpoint, *dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	c, err := snapshot.ParseCompression(*comp)
	if err != nil {
		return nil, err
	}
	var db int64
	start := time.Now()
	s, err := capture.Full(ctx, cli, st, snapshot.FullOptions{Codec: snapshot.Codec{Compression: c}, SpoolDir: *spool})
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	if status, err := cli.Status(ctx, *endpoint); err == nil {
		db = status.DbSize
	}
	info, err := os.Stat(filepath.Join(*dir, s.Key))
	if err != nil {
		return nil, err
	}
	return fullResult{Key: s.Key, Size: info.Size(), DBBytes: db, PeakRSS: peakRSS(), Took: took}, nil
}

// deltaBench runs a Snapshotter in a child process while writers here put
// as fast as the member takes, and reports how long the oldest event of
// each delta waited to be on the store, and the child's peak RSS.
func deltaBench(ctx context.Context, cfg config) ([]row, error) {
	const period, limit = 5 * time.Second, 64 << 20
	m, err := startMember(filepath.Join(cfg.dir, "etcd-delta"))
	if err != nil {
		return nil, err
	}
	defer m.close()
	storeDir := filepath.Join(cfg.dir, "delta-store")
	if err := os.MkdirAll(storeDir, 0o750); err != nil {
		return nil, err
	}
	// The member's write rate alone, then with the capture attached, then
	// alone again (the member slows as its database grows; the mean of the
	// two runs alone is the reference): what a sidecar costs the member it
	// backs up, on the same two cores.
	fmt.Fprintf(os.Stderr, "bench: writing for %v without a sidecar ...\n", cfg.load)
	_, before, err := load(ctx, m.cli, cfg.load)
	if err != nil {
		return nil, err
	}
	var out deltaResult
	kill, wait, err := startChild(ctx, &out, "deltas", "-endpoint", m.endpoint, "-store", storeDir,
		"-period", period.String(), "-limit", fmt.Sprint(limit))
	if err != nil {
		return nil, err
	}
	if err := waitForFull(ctx, storeDir); err != nil {
		kill(syscall.SIGKILL)
		return nil, err
	}
	// Stopping flushes the last events: that delta counts too.
	written, writes, err := loadBeside(ctx, m.cli, cfg.load, "with the sidecar", kill, wait)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: writing for %v without a sidecar again ...\n", cfg.load)
	_, after, err := load(ctx, m.cli, cfg.load)
	if err != nil {
		return nil, err
	}
	// A bare watch that drops every event is the floor of any capture
	// built on etcd's watch: what etcd spends sending the events, and
	// what receiving them costs on the same cores.
	var bare bareWatchResult
	kill, wait, err = startChild(ctx, &bare, "watch", "-endpoint", m.endpoint)
	if err != nil {
		return nil, err
	}
	_, watched, err := loadBeside(ctx, m.cli, cfg.load, "with a bare watch", kill, wait)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: writing for %v without a watch ...\n", cfg.load)
	_, last, err := load(ctx, m.cli, cfg.load)
	if err != nil {
		return nil, err
	}
	alone, aloneLater := (before+after)/2, (after+last)/2
	var lags []time.Duration
	for _, d := range out.Deltas {
		if at, ok := written[d.StartRevision]; ok {
			lags = append(lags, time.Unix(0, d.Uploaded).Sub(at))
		}
	}
	if len(lags) == 0 {
		return nil, errors.New("no delta holds a revision the writers wrote")
	}
	slices.Sort(lags)
	rss := out.PeakRSS
	goal := period + time.Second
	// The time 10,000 writes take at the rate measured.
	per10k := func(n int) time.Duration { return time.Duration(float64(cfg.load) / float64(n) * 10000) }
	return []row{{
		Subject: "delta capture", Op: fmt.Sprintf("%.0f writes/s, 1 KiB", float64(writes)/cfg.load.Seconds()),
		Bytes: out.Bytes, Ours: lags[len(lags)-1], Reference: "goal: period (5 s) + 1 s", Ref: goal,
		Note: fmt.Sprintf("worst lag of %d deltas (median %.2fs); peak RSS %d MiB at a %d MiB limit (goal ≤ %d MiB)",
			len(lags), lags[len(lags)/2].Seconds(), rss>>20, limit>>20, (limit>>20)+64),
		Time: true,
	}, {
		Subject: "delta capture's cost on etcd", Op: "10,000 puts of 1 KiB, 32 writers", Bytes: out.Bytes,
		Ours: per10k(writes), Reference: "the member without a sidecar", Ref: per10k(alone), Time: true,
		Note: fmt.Sprintf("%.0f writes/s with the sidecar; without it %.0f before and %.0f after (goal: ≥ 0.95×); the sidecar used %.0f%% of a core",
			float64(writes)/cfg.load.Seconds(), float64(before)/cfg.load.Seconds(), float64(after)/cfg.load.Seconds(), out.CPU.Seconds()/cfg.load.Seconds()*100),
	}, {
		Subject: "a bare watch's cost on etcd", Op: "10,000 puts of 1 KiB, 32 writers",
		Ours: per10k(watched), Reference: "the member without a watch", Ref: per10k(aloneLater), Time: true,
		Note: fmt.Sprintf("%.0f writes/s with a watch that drops %d events; without it %.0f before and %.0f after; the watcher used %.0f%% of a core",
			float64(watched)/cfg.load.Seconds(), bare.Events, float64(after)/cfg.load.Seconds(), float64(last)/cfg.load.Seconds(), bare.CPU.Seconds()/cfg.load.Seconds()*100),
	}, {
		// What the capture costs beyond the watch it needs: each run's rate
		// is taken relative to the member's own rate around it.
		Subject: "delta capture against a bare watch", Op: "10,000 puts of 1 KiB, 32 writers",
		Ours: per10k(writes), Reference: "a bare watch, at the member's speed then", Ref: time.Duration(float64(per10k(watched)) * float64(aloneLater) / float64(alone)), Time: true,
		Note: fmt.Sprintf("the member kept %.2f of its rate with the capture, %.2f with a bare watch", float64(writes)/float64(alone), float64(watched)/float64(aloneLater)),
	}}, nil
}

type bareWatchResult struct {
	Events int64
	CPU    time.Duration
}

// childWatch is a clientv3 watch of the whole keyspace that counts the
// events and keeps none, until SIGTERM.
func childWatch(ctx context.Context, args []string) (any, error) {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	cli, err := etcdclient.New(ctx, etcdclient.Config{Endpoints: []string{*endpoint}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	var res bareWatchResult
	for wr := range cli.Watch(clientv3.WithRequireLeader(ctx), "", clientv3.WithPrefix(), clientv3.WithProgressNotify()) {
		res.Events += int64(len(wr.Events))
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return res, nil
}

type deltaResult struct {
	Deltas  []deltaWritten
	Bytes   int64
	PeakRSS int64
	// CPU is the child's user and system time, its first full included.
	CPU time.Duration
}

type deltaWritten struct {
	StartRevision, LastRevision int64
	Uploaded                    int64 // unix nanoseconds
}

// childDeltas is the child process of deltaBench: a Snapshotter until
// SIGTERM.
func childDeltas(ctx context.Context, args []string) (any, error) {
	fs := flag.NewFlagSet("deltas", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "")
	dir := fs.String("store", "", "")
	period := fs.Duration("period", 0, "")
	limit := fs.Int64("limit", 0, "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	// As a sidecar does: the Go heap may otherwise grow to twice what is
	// live before it collects.
	debug.SetMemoryLimit(*limit + 48<<20)
	cli, st, err := childClientStore(*endpoint, *dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	var res deltaResult
	var mu sync.Mutex
	s, err := capture.New(cli, st, capture.Options{
		FullSchedule: "@every 24h", DeltaPeriod: *period, DeltaMemoryLimit: *limit, RetentionPeriod: -1,
		Codec: snapshot.Codec{Compression: snapshot.Zstd},
		OnResult: func(r capture.Result) {
			if r.Op != capture.OpDelta || r.Err != nil {
				return
			}
			fmt.Fprintf(os.Stderr, "bench: delta %s (%s): %d events in %v\n", r.Snapshot.Key, r.Reason, r.Events, r.Duration.Round(time.Millisecond))
			mu.Lock()
			defer mu.Unlock()
			res.Deltas = append(res.Deltas, deltaWritten{r.Snapshot.StartRevision, r.Snapshot.LastRevision, time.Now().UnixNano()})
			if info, err := os.Stat(filepath.Join(*dir, r.Snapshot.Key)); err == nil {
				res.Bytes += info.Size()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := s.Run(ctx); err != nil {
		return nil, err
	}
	res.PeakRSS = peakRSS()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		res.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return res, nil
}

// load puts 1 KiB values from 32 writers for d and returns when each
// revision was acknowledged.
func load(ctx context.Context, cli *clientv3.Client, d time.Duration) (map[int64]time.Time, int, error) {
	const writers = 32
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	acks := make([][]ack, writers)
	var wg sync.WaitGroup
	value := strings.Repeat("v", 1024)
	for w := range writers {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				resp, err := cli.Put(ctx, fmt.Sprintf("/load/%02d/%04d", w, i%1000), value)
				if err != nil {
					return
				}
				acks[w] = append(acks[w], ack{resp.Header.Revision, time.Now()})
			}
		})
	}
	wg.Wait()
	written := map[int64]time.Time{}
	for _, a := range acks {
		for _, x := range a {
			written[x.rev] = x.at
		}
	}
	if len(written) == 0 {
		return nil, 0, errors.New("no write succeeded")
	}
	return written, len(written), nil
}

// loadBeside is load while a child runs, which is then stopped with
// SIGTERM and its result waited for.
func loadBeside(ctx context.Context, cli *clientv3.Client, d time.Duration, what string, kill func(os.Signal), wait func() error) (map[int64]time.Time, int, error) {
	fmt.Fprintf(os.Stderr, "bench: writing for %v %s ...\n", d, what)
	written, n, err := load(ctx, cli, d)
	if err != nil {
		kill(syscall.SIGKILL)
		return nil, 0, err
	}
	kill(syscall.SIGTERM)
	return written, n, wait()
}

type ack struct {
	rev int64
	at  time.Time
}

func waitForFull(ctx context.Context, dir string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		matches, _ := filepath.Glob(filepath.Join(dir, "v2", "Full-*"))
		if len(matches) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("the snapshotter wrote no full snapshot within 2 minutes")
}

func childClientStore(endpoint, dir string) (*clientv3.Client, store.Store, error) {
	cli, err := etcdclient.New(context.Background(), etcdclient.Config{Endpoints: []string{endpoint}})
	if err != nil {
		return nil, nil, err
	}
	st, err := store.NewFile(dir)
	if err != nil {
		_ = cli.Close()
		return nil, nil, err
	}
	return cli, st, nil
}

// children are the modes the bench binary runs in when it is its own child.
var children = map[string]func(context.Context, []string) (any, error){
	"full":    childFull,
	"deltas":  childDeltas,
	"watch":   childWatch,
	"compact": childCompact,
	"restore": childRestore,
}

// runChild runs the bench binary in a child mode and decodes what it prints.
func runChild(ctx context.Context, out any, mode string, args ...string) error {
	_, wait, err := startChild(ctx, out, mode, args...)
	if err != nil {
		return err
	}
	return wait()
}

// startChild starts the bench binary in a child mode; signal reaches it,
// wait decodes what it prints.
func startChild(ctx context.Context, out any, mode string, args ...string) (signal func(os.Signal), wait func() error, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"-child", mode}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	signal = func(s os.Signal) { _ = cmd.Process.Signal(s) }
	wait = func() error {
		data, _ := bufio.NewReader(stdout).ReadBytes('\n')
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("child %s: %w", mode, err)
		}
		return json.Unmarshal(data, out)
	}
	return signal, wait, nil
}

// runAsChild is main for a child: it runs the mode until done or SIGTERM
// and prints its result as one JSON line.
func runAsChild(mode string, args []string) error {
	run, ok := children[mode]
	if !ok {
		return fmt.Errorf("no child mode %q", mode)
	}
	ctx, stop := signalContext()
	defer stop()
	res, err := run(ctx, args)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
