package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// CopyOptions configures Copy. The zero value copies every chain, ten
// objects at a time, without waiting for a final snapshot.
type CopyOptions struct {
	// MaxChains copies only the newest chains (by their full snapshot's
	// time). 0: all.
	MaxChains int
	// MaxAge copies only chains whose full snapshot is younger. 0: any.
	MaxAge time.Duration
	// Parallel is how many objects are copied at once. Default 10.
	Parallel int
	// WaitForFinal first waits until the source's newest full snapshot is
	// final (the cluster was stopped for good), for at most WaitTimeout
	// (0: until ctx ends), asking every PollInterval (default 15 s). On
	// timeout it copies what there is.
	WaitForFinal bool
	WaitTimeout  time.Duration
	PollInterval time.Duration
	// Retention, when set, copies only what it keeps of the source (at
	// Now, with Pins): a second site with a retention of its own,
	// shorter than the first's, is not written what its retention
	// deletes at once, only to be written again by the next copy.
	Retention *Retention
	Pins      Pins
	// Now is the clock MaxAge and Retention are measured on. Default
	// time.Now.
	Now func() time.Time
	// Logger: nil discards.
	Logger *slog.Logger
}

// CopyResult says what Copy did, by object key.
type CopyResult struct {
	Copied, Skipped []string
	// FinalSeen: the source's newest full was final when the copy began.
	FinalSeen bool
}

// Copy copies the source store's chains to the target store, as
// etcd-backup-restore's copy of backups does (etcd-druid runs it to move
// a cluster's backups): whole chains, newest first as the options limit
// them, objects the target already holds skipped, and a final full
// snapshot written without its .final (on the target it starts a chain
// like any other). Each object lands whole or not at all.
func Copy(ctx context.Context, src, dst store.Store, o CopyOptions) (CopyResult, error) {
	if o.Parallel <= 0 {
		o.Parallel = 10
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 15 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := logger(o.Logger)
	var res CopyResult
	if o.WaitForFinal {
		seen, err := waitForFinal(ctx, src, o, log)
		if err != nil {
			return res, err
		}
		res.FinalSeen = seen
	}
	cat, err := List(ctx, src)
	if err != nil {
		return res, fmt.Errorf("copy: the source: %w", err)
	}
	there, err := List(ctx, dst)
	if err != nil {
		return res, fmt.Errorf("copy: the target: %w", err)
	}
	have := map[string]bool{}
	for _, s := range there.All() {
		have[s.Key] = true
	}
	// The timeline records first: they place the objects copied after
	// them, as on the source.
	if err := copyTimelines(ctx, cat, there, src, dst); err != nil {
		return res, err
	}
	kept := func(Snapshot) bool { return true }
	if o.Retention != nil {
		// Planned over what the target will hold, its own objects and
		// the source's: its GC then keeps all that is copied (fewer
		// objects only let it keep more), where a plan over the source
		// alone could copy what the target's objects push out of its
		// retention, again at every copy.
		all := slices.Clone(cat.all)
		copied := map[string]bool{}
		for _, s := range cat.all {
			copied[targetKey(s)] = true
		}
		for _, s := range there.all {
			if !copied[s.Key] {
				all = append(all, s)
			}
		}
		keep := map[string]bool{}
		for _, k := range o.Retention.Plan(newCatalog(all, cat.Timelines), o.Now(), o.Pins).Kept {
			keep[k.Snapshot.Key] = true
		}
		kept = func(s Snapshot) bool { return keep[s.Key] }
	}
	var todo []Snapshot
	for _, s := range chosen(cat, o) {
		if !kept(s) {
			continue
		}
		if have[targetKey(s)] {
			res.Skipped = append(res.Skipped, s.Key)
			continue
		}
		todo = append(todo, s)
	}
	if err := copyBundles(ctx, src, dst, cat, kept, o, log); err != nil {
		return res, err
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, o.Parallel)
	)
	for _, s := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := copyObject(ctx, src, dst, s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			log.Info("copied", "key", s.Key, "to", targetKey(s))
			res.Copied = append(res.Copied, s.Key)
		}()
	}
	wg.Wait()
	slices.Sort(res.Copied)
	return res, errors.Join(errs...)
}

// copyBundles writes the restore bundles the target lacks that the fulls
// copied take (a bundle is sealed: copied as it is).
func copyBundles(ctx context.Context, src, dst store.Store, cat Catalog, kept func(Snapshot) bool, o CopyOptions, log *slog.Logger) error {
	bundles, err := ListBundles(ctx, src)
	if err != nil || len(bundles) == 0 {
		return err
	}
	var fulls []Snapshot
	for _, s := range chosen(cat, o) {
		if s.Kind == KindFull && kept(s) {
			fulls = append(fulls, s)
		}
	}
	there, err := ListBundles(ctx, dst)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, b := range there {
		have[b.Key] = true
	}
	needed := neededBundles(bundles, fulls)
	for _, b := range bundles {
		if have[b.Key] || !needed[b.Key] {
			continue
		}
		r, err := src.Get(ctx, b.Key)
		if err != nil {
			return fmt.Errorf("copy %s: %w", b.Key, err)
		}
		err = dst.Put(ctx, b.Key, r)
		_ = r.Close()
		if err != nil && !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("copy %s: %w", b.Key, err)
		}
		log.Info("copied", "key", b.Key)
	}
	return nil
}

// copyTimelines writes the source's timeline records the target lacks.
func copyTimelines(ctx context.Context, cat, there Catalog, src, dst store.Store) error {
	for _, t := range cat.Timelines {
		if _, ok := there.FindTimeline(t.ID); ok || t.Key == "" {
			continue
		}
		r, err := src.Get(ctx, t.Key)
		if err != nil {
			return fmt.Errorf("copy %s: %w", t.Key, err)
		}
		err = dst.Put(ctx, t.Key, r)
		_ = r.Close()
		if err != nil && !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("copy %s: %w", t.Key, err)
		}
	}
	return nil
}

// chosen are the objects of the chains the options keep, newest chain
// first; deltas with no full snapshot before them belong to no chain.
func chosen(cat Catalog, o CopyOptions) []Snapshot {
	chains := cat.AllChains()
	slices.SortStableFunc(chains, func(a, b Chain) int { return b.Full.Created.Compare(a.Full.Created) })
	var out []Snapshot
	n := 0
	for _, c := range chains {
		if o.MaxChains > 0 && n == o.MaxChains {
			break
		}
		if o.MaxAge > 0 && !c.Full.Created.After(o.Now().Add(-o.MaxAge)) {
			continue
		}
		out = append(out, c.Full)
		out = append(out, c.Deltas...)
		n++
	}
	return out
}

// targetKey is where s goes: its key without .final.
func targetKey(s Snapshot) string {
	return path.Join(path.Dir(s.Key), strings.TrimSuffix(path.Base(s.Key), suffixFinal))
}

func copyObject(ctx context.Context, src, dst store.Store, s Snapshot) error {
	if s.Kind == KindFull {
		// Its identity first: the target names the cluster it is of.
		if id, ok, err := ReadIdentity(ctx, src, s); err == nil && ok {
			if err := WriteIdentity(ctx, dst, s, id); err != nil && !errors.Is(err, ErrConflict) {
				return fmt.Errorf("copy the identity of %s: %w", s.Key, err)
			}
		}
	}
	r, err := src.Get(ctx, s.Key)
	if err != nil {
		return fmt.Errorf("copy %s: %w", s.Key, err)
	}
	defer func() { _ = r.Close() }()
	if err := dst.Put(ctx, targetKey(s), r); err != nil {
		return fmt.Errorf("copy %s: %w", s.Key, err)
	}
	return nil
}

// waitForFinal waits until the source's newest full snapshot is final.
// It returns false, and no error, when WaitTimeout passed first.
func waitForFinal(ctx context.Context, src store.Store, o CopyOptions, log *slog.Logger) (bool, error) {
	wctx := ctx
	if o.WaitTimeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.WaitTimeout)
		defer cancel()
	}
	log.Info("copy: waiting for a final full snapshot on the source")
	for {
		cat, err := List(wctx, src)
		if err == nil {
			if fulls := cat.Fulls(); len(fulls) > 0 && fulls[len(fulls)-1].Final {
				log.Info("copy: final full snapshot found", "key", fulls[len(fulls)-1].Key)
				return true, nil
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			log.Info("copy: no final full snapshot in time; copying what there is", "waited", o.WaitTimeout)
			return false, nil
		case <-time.After(o.PollInterval):
		}
	}
}
