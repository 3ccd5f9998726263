package snapshot

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcdkit/etcdkit/store"
)

// FirstTimeline is the ID of the history a store begins with: every
// object written before the first timeline record belongs to it.
const FirstTimeline = "first"

// ErrNoTimeline: the store has no timeline of that ID.
var ErrNoTimeline = errors.New("no such timeline")

// Timeline is one history of a store's backups. A cluster restored to a
// revision below the end of the history it came from lives a new past
// from there: its backups begin a new timeline, which forks from the old
// one at that revision, and never mix with the old one's. Object names
// cannot say which timeline they belong to (etcd-backup-restore fixes
// them), so a timeline begins with a record written before any of its
// objects, and every object belongs to the newest timeline begun when it
// was created. So a cluster writes only while its timeline is the newest
// (an uploader checks before each object), and the old one's objects stay
// exactly what they were: restorable as that timeline.
type Timeline struct {
	// ID is FirstTimeline, or the record's 8 hex characters.
	ID string `json:"id"`
	// Began is when the record was written (whole seconds, the name's);
	// zero for the first.
	Began time.Time `json:"began"`
	// Parent is the timeline this one forked from, ForkRevision the last
	// revision they share (0: not known, and nothing is shared) and
	// ForkSnapshot the parent's full snapshot the fork was restored from.
	Parent       string `json:"parent,omitempty"`
	ForkRevision int64  `json:"fork_revision,omitempty"`
	ForkSnapshot string `json:"fork_snapshot,omitempty"`
	// ClusterID (hex) is the cluster that began it, Reason why.
	ClusterID string `json:"cluster_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Preceding are the keys of objects that were on the store when it
	// began but are named with its second or later (written in the same
	// second, or by a clock ahead of this one's): they are older
	// timelines', whatever their names say.
	Preceding []string `json:"preceding,omitempty"`
	// Key is the record's key, "" for the first.
	Key string `json:"-"`
	// Unreadable: the record's key places the timeline, its content
	// cannot be read, so who began it and from where are not known.
	Unreadable bool `json:"-"`
	// written is when the store says the record was written.
	written time.Time
}

// maxRecordAhead is how far past the time its store says it was written a
// timeline record's name may be dated before a record that holds no
// snapshot is set aside: further than any clock drifts, so it was named
// by hand.
const maxRecordAhead = time.Hour

// Stamp is the time an object written on t is named with: now, or when
// t began where now is before it. An object belongs to the newest
// timeline begun when it was named, so one named by a clock behind the
// one that began t would belong to t's parent and leave t's chain a gap.
func (t Timeline) Stamp(now time.Time) time.Time {
	if now.Before(t.Began) {
		return t.Began
	}
	return now
}

// String names the timeline for people: its ID, and where it forked.
func (t Timeline) String() string {
	switch {
	case t.Parent == "":
		return "timeline " + t.ID
	case t.ForkRevision > 0:
		return fmt.Sprintf("timeline %s (forked from %s at revision %d)", t.ID, t.Parent, t.ForkRevision)
	}
	return fmt.Sprintf("timeline %s (begun after %s, sharing none of it)", t.ID, t.Parent)
}

func timelineKey(began time.Time, id string) string {
	return fmt.Sprintf("%s/%d-%s.json", timelineDir, began.Unix(), id)
}

// parseTimelineKey reads a record's key: <unix>-<id>.json.
func parseTimelineKey(key string) (began time.Time, id string, ok bool) {
	name, ok := strings.CutSuffix(path.Base(key), ".json")
	if !ok || path.Dir(key) != timelineDir {
		return time.Time{}, "", false
	}
	unix, id, ok := strings.Cut(name, "-")
	sec, err := strconv.ParseInt(unix, 10, 64)
	if !ok || err != nil || id == "" || id == FirstTimeline {
		return time.Time{}, "", false
	}
	return time.Unix(sec, 0).UTC(), id, true
}

// BeginTimeline writes the record of a new timeline, t with its ID and
// Began filled in, and returns it: from now on every object written to
// st belongs to it. existing are the objects on the store now. It is
// written once, create-only.
func BeginTimeline(ctx context.Context, st store.Store, t Timeline, now time.Time, existing []Snapshot) (Timeline, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Timeline{}, err
	}
	t.ID, t.Began = hex.EncodeToString(b[:]), time.Unix(now.Unix(), 0).UTC()
	t.Key = timelineKey(t.Began, t.ID)
	t.Preceding = nil
	for _, s := range existing {
		if !s.Created.Before(t.Began) {
			t.Preceding = append(t.Preceding, s.Key)
		}
	}
	if err := putJSON(ctx, st, t.Key, t); err != nil {
		return Timeline{}, fmt.Errorf("begin %s: %w", t, err)
	}
	return t, nil
}

// listTimelines reads the store's timelines, the first one first and the
// others in the order they began.
func listTimelines(ctx context.Context, st store.Store) ([]Timeline, error) {
	objs, err := st.List(ctx, timelineDir+"/")
	if err != nil {
		return nil, fmt.Errorf("list timelines: %w", err)
	}
	out := []Timeline{{ID: FirstTimeline}}
	for _, o := range objs {
		began, id, ok := parseTimelineKey(o.Key)
		if !ok {
			continue
		}
		t, found, err := getJSON[Timeline](ctx, st, o.Key)
		switch {
		case err != nil && !errors.Is(err, errBadRecord):
			// Unknown is not unreadable.
			return nil, fmt.Errorf("timeline record %s: %w", o.Key, err)
		case err != nil || !found:
			// The key alone places the timeline; what it forked from is
			// then unknown, so it shares nothing.
			t = Timeline{Reason: fmt.Sprintf("its record cannot be read: %v", cmp.Or[error](err, store.ErrNotFound)), Unreadable: true}
		}
		t.ID, t.Began, t.Key, t.written = id, began, o.Key, o.Modified
		out = append(out, t)
	}
	slices.SortStableFunc(out[1:], func(a, b Timeline) int {
		if c := a.Began.Compare(b.Began); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// timelineOf is the timeline object s belongs to: the newest begun at or
// before it was created that does not list it as preceding it.
func timelineOf(tls []Timeline, s Snapshot) string {
	for i := len(tls) - 1; i > 0; i-- {
		if !tls[i].Began.After(s.Created) && !slices.Contains(tls[i].Preceding, s.Key) {
			return tls[i].ID
		}
	}
	return FirstTimeline
}

// Newest fails with ErrSuperseded when a timeline newer than t began on
// st: an uploader asks before each object, since from then on what it
// writes belongs to the newer timeline. It reads the records' names, and
// the newest record only when it is another's.
func Newest(ctx context.Context, st store.Store, t Timeline) error {
	objs, err := st.List(ctx, timelineDir+"/")
	if err != nil {
		return fmt.Errorf("list timelines: %w", err)
	}
	newest := Timeline{ID: FirstTimeline}
	for _, o := range objs {
		began, id, ok := parseTimelineKey(o.Key)
		if ok && (began.After(newest.Began) || began.Equal(newest.Began) && id > newest.ID) {
			newest = Timeline{ID: id, Began: began, Key: o.Key}
		}
	}
	if newest.ID == t.ID {
		return nil
	}
	if rec, ok, err := getJSON[Timeline](ctx, st, newest.Key); err == nil && ok {
		newest.Parent, newest.ForkRevision, newest.ClusterID, newest.Reason = rec.Parent, rec.ForkRevision, rec.ClusterID, rec.Reason
	}
	by := ""
	if newest.ClusterID != "" {
		by = " by cluster " + newest.ClusterID
	}
	if newest.Reason != "" {
		by += " (" + newest.Reason + ")"
	}
	return fmt.Errorf("%w: %s began at %s%s, after this cluster's %s: what this cluster writes here would belong to it; point this cluster at another prefix",
		ErrSuperseded, newest, newest.Began.Format(time.RFC3339), by, t)
}

// ErrSuperseded: a newer timeline began on the store while this cluster
// wrote into an older one. Every object written from then on belongs to
// the newer timeline, so the older one's cluster must stop writing there.
var ErrSuperseded = errors.New("a newer timeline began on this prefix")
