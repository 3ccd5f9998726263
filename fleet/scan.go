package fleet

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/restore"
	"github.com/etcdkit/etcdkit/sidecar/api"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/view"
)

// ScanOptions configures Scan. The zero value calls a prefix stale after
// a day without a new object, estimates restores at the bench machine's
// speed, prices nothing and reads 8 prefixes at a time.
type ScanOptions struct {
	// Stale: a prefix without a new snapshot for longer is an orphan (its
	// cluster is gone, or its sidecar stopped). Default 24 h.
	Stale time.Duration
	// Speed estimates each restore (restore.EstimateRestore).
	Speed restore.Speed
	// PricePerGiBMonth prices the bytes each prefix keeps.
	PricePerGiBMonth float64
	// Concurrency is how many prefixes are read at once. Default 8.
	Concurrency int
	// Now is the scan's clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

func (o ScanOptions) withDefaults() ScanOptions {
	if o.Stale <= 0 {
		o.Stale = 24 * time.Hour
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Layouts a prefix's backups can have.
const (
	// LayoutEtcdkit: etcdkit's sidecar wrote them (its records beside
	// the snapshots).
	LayoutEtcdkit = "etcdkit"
	// LayoutEtcdBackupRestore: snapshots alone, as etcd-backup-restore
	// writes them.
	LayoutEtcdBackupRestore = "etcd-backup-restore"
)

// Cluster is one prefix's backups, summed up.
type Cluster struct {
	// Prefix is the prefix's path in the bucket ("" for its root).
	Prefix    string `json:"prefix"`
	Layout    string `json:"layout"`
	ClusterID string `json:"cluster_id,omitempty"`
	Timeline  string `json:"timeline"`
	// NewestFull and NewestDelta are the latest chain's; Revision the
	// last it holds.
	NewestFull   string    `json:"newest_full"`
	NewestFullAt time.Time `json:"newest_full_at"`
	NewestDelta  string    `json:"newest_delta,omitempty"`
	// NewestDeltaAt is zero when the chain has no delta.
	NewestDeltaAt time.Time `json:"newest_delta_at,omitzero"`
	Revision      int64     `json:"revision"`
	// RPOSeconds is the age of the newest snapshot: the writes a loss now
	// would take.
	RPOSeconds float64 `json:"rpo_seconds"`
	// ChainDeltas are the latest chain's deltas; Snapshots and Bytes
	// every object of the prefix.
	ChainDeltas int   `json:"chain_deltas"`
	Snapshots   int   `json:"snapshots"`
	Objects     int   `json:"objects"`
	Bytes       int64 `json:"bytes"`
	// MonthlyCost is Bytes at ScanOptions.PricePerGiBMonth.
	MonthlyCost             float64 `json:"monthly_cost,omitempty"`
	EstimatedRestoreSeconds float64 `json:"estimated_restore_seconds"`
	// LastBackupAt is when the store last took a snapshot of the prefix
	// (the records beside them do not count: a drill's keeps no cluster
	// alive); Stale says that is longer ago than ScanOptions.Stale.
	LastBackupAt time.Time `json:"last_backup_at"`
	Stale        bool      `json:"stale"`
	// Drill is the newest drill record, nil when none was recorded.
	Drill *snapshot.DrillRecord `json:"drill,omitempty"`
	// Pins are the prefix's pinned chains (etcd-backup pin).
	Pins []api.PinView `json:"pins,omitempty"`
	// Problem says what is wrong with the latest chain or reading it.
	Problem string `json:"problem,omitempty"`
}

// Fleet is a scan's result: every prefix with backups, in prefix order.
type Fleet struct {
	Clusters []Cluster `json:"clusters"`
	// Objects and Bytes in the whole listing (other objects included).
	Objects int           `json:"objects"`
	Bytes   int64         `json:"bytes"`
	At      time.Time     `json:"at"`
	Took    time.Duration `json:"-"`
}

// Scan lists the bucket st is rooted at once and sums up every prefix
// that holds backups. A prefix whose records cannot be read is reported
// with its Problem, not dropped: unknown is not absent.
func Scan(ctx context.Context, st store.Store, opts ScanOptions) (Fleet, error) {
	opts = opts.withDefaults()
	start := opts.Now()
	objs, err := st.List(ctx, "")
	if err != nil {
		return Fleet{}, fmt.Errorf("fleet: list %v: %w", st, err)
	}
	// JSON.md promises UTC; the store and the clock give local times.
	f := Fleet{Objects: len(objs), At: start.UTC()}
	for _, o := range objs {
		f.Bytes += o.Size
	}
	groups := Group(objs)
	prefixes := make([]string, 0, len(groups))
	for p := range groups {
		prefixes = append(prefixes, p)
	}
	slices.Sort(prefixes)
	f.Clusters = make([]Cluster, len(prefixes))
	var wg sync.WaitGroup
	sem := make(chan struct{}, opts.Concurrency)
	for i, p := range prefixes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			f.Clusters[i] = summarize(ctx, &listed{st: st, prefix: p, objs: groups[p]}, opts, start)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return f, err
	}
	f.Took = time.Since(start)
	return f, nil
}

// Group sorts a bucket's objects by the prefix whose backups they are,
// with keys made relative to it ("" or ending in "/"): a prefix holds
// backups where a key parses as a snapshot of etcdkit's or
// etcd-backup-restore's layout (v2/Full-…, v1/…), and etcdkit's records
// (etcdkit/…) belong to such a prefix. Other objects are left out.
func Group(objs []store.Object) map[string][]store.Object {
	out := map[string][]store.Object{}
	var rest []store.Object
	for _, o := range objs {
		if p, ok := snapshotPrefix(o.Key); ok {
			o.Key = o.Key[len(p):]
			out[p] = append(out[p], o)
		} else {
			rest = append(rest, o)
		}
	}
	for _, o := range rest {
		// The longest prefix: y/etcdkit/etcdkit/… is y/etcdkit's record.
		at := -1
		for i := range boundaries(o.Key) {
			if _, ok := out[o.Key[:i]]; ok && strings.HasPrefix(o.Key[i:], "etcdkit/") {
				at = i
			}
		}
		if at >= 0 {
			p := o.Key[:at]
			o.Key = o.Key[at:]
			out[p] = append(out[p], o)
		}
	}
	return out
}

// boundaries yields the starts of a key's path elements.
func boundaries(key string) func(func(int) bool) {
	return func(yield func(int) bool) {
		if !yield(0) {
			return
		}
		for i := 0; i < len(key); i++ {
			if key[i] == '/' && !yield(i+1) {
				return
			}
		}
	}
}

// snapshotPrefix is the prefix a snapshot's key lies under.
func snapshotPrefix(key string) (string, bool) {
	for i := range boundaries(key) {
		rest := key[i:]
		if !strings.HasPrefix(rest, "v2/") && !strings.HasPrefix(rest, "v1/") {
			continue
		}
		if _, err := snapshot.Parse(rest); err == nil {
			return key[:i], true
		}
	}
	return "", false
}

// summarize reads one prefix.
func summarize(ctx context.Context, l *listed, opts ScanOptions, now time.Time) Cluster {
	c := Cluster{Prefix: strings.TrimSuffix(l.prefix, "/"), Layout: LayoutEtcdBackupRestore}
	var drills []store.Object
	for _, o := range l.objs {
		c.Objects++
		c.Bytes += o.Size
		switch {
		case strings.HasPrefix(o.Key, "etcdkit/"):
			c.Layout = LayoutEtcdkit
			if snapshot.IsDrillKey(o.Key) {
				drills = append(drills, o)
			}
		default:
			c.Snapshots++
			if o.Modified.After(c.LastBackupAt) {
				c.LastBackupAt = o.Modified.UTC()
			}
		}
	}
	c.MonthlyCost = float64(c.Bytes) / (1 << 30) * opts.PricePerGiBMonth
	c.Stale = now.Sub(c.LastBackupAt) > opts.Stale
	cat, err := snapshot.List(ctx, l)
	if err != nil {
		c.Problem = err.Error()
		return c
	}
	c.Timeline = cat.Timeline.ID
	latest, err := cat.Latest()
	if err != nil {
		c.Problem = err.Error()
		return c
	}
	// The columns of the chain's summary list and the API show: its
	// newest full and delta, the revision, the problem, the estimate.
	s, err := view.Read(ctx, l, latest, opts.Speed)
	c.NewestFull, c.NewestFullAt, c.Revision, c.ChainDeltas = s.Full.Key, s.Full.Created, s.LastRevision, len(s.Deltas)
	newest := s.Full.Created
	if n := len(s.Deltas); n > 0 {
		d := s.Deltas[n-1]
		c.NewestDelta, c.NewestDeltaAt, newest = d.Key, d.Created, d.Created
	}
	c.RPOSeconds = max(0, now.Sub(newest).Seconds())
	c.EstimatedRestoreSeconds, c.Problem, c.ClusterID = s.EstimatedRestore, s.Problem, s.ClusterID
	if err != nil {
		c.Problem = cmp.Or(c.Problem, err.Error())
	}
	pins, err := snapshot.ReadPins(ctx, l)
	if err != nil {
		c.Problem = cmp.Or(c.Problem, err.Error())
	}
	for _, full := range slices.Sorted(maps.Keys(pins)) {
		c.Pins = append(c.Pins, view.PinOf(pins[full]))
	}
	if keys := snapshot.DrillKeys(drills); len(keys) > 0 {
		r, ok, err := snapshot.ReadDrill(ctx, l, keys[len(keys)-1])
		switch {
		case err != nil:
			c.Problem = cmp.Or(c.Problem, err.Error())
		case ok:
			c.Drill = &r
		}
	}
	return c
}
