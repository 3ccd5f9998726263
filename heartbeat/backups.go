package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// BackupGroupVersion is where etcdkit's backup objects are
// (deploy/kubernetes/etcdsnapshot-crd.yaml): EtcdSnapshot, one per full
// snapshot in the store, and EtcdBackup, a full snapshot asked for.
var BackupGroupVersion = schema.GroupVersion{Group: "backup.etcdkit.io", Version: "v1alpha1"}

// ClusterLabel names the cluster an EtcdSnapshot shows a backup of.
const ClusterLabel = "backup.etcdkit.io/cluster"

const (
	etcdSnapshots = "etcdsnapshots"
	etcdBackups   = "etcdbackups"
)

// ObjectClient lists, makes, patches and deletes the objects of
// BackupGroupVersion's resources, as JSON.
type ObjectClient interface {
	// List returns the items of resource in namespace that selector
	// (a label selector, "" all) picks.
	List(ctx context.Context, namespace, resource, selector string) ([]json.RawMessage, error)
	Create(ctx context.Context, namespace, resource string, obj []byte) error
	// PatchStatus merges status into the object's status subresource.
	PatchStatus(ctx context.Context, namespace, resource, name string, status []byte) error
	Delete(ctx context.Context, namespace, resource, name string) error
}

// NewObjectClient is a client of the API server's backup objects, with
// userAgent; timeout as NewClient's.
func NewObjectClient(cfg *rest.Config, userAgent string, timeout time.Duration) (ObjectClient, error) {
	rc, err := restClientFor(cfg, BackupGroupVersion, userAgent, timeout, nil)
	if err != nil {
		return nil, err
	}
	return objectClient{rc}, nil
}

type objectClient struct{ rc *rest.RESTClient }

func (c objectClient) List(ctx context.Context, namespace, resource, selector string) ([]json.RawMessage, error) {
	req := c.rc.Get().Namespace(namespace).Resource(resource)
	if selector != "" {
		req = req.Param("labelSelector", selector)
	}
	b, err := req.Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%s in %s: %w", resource, namespace, err)
	}
	return list.Items, nil
}

func (c objectClient) Create(ctx context.Context, namespace, resource string, obj []byte) error {
	return c.rc.Post().Namespace(namespace).Resource(resource).Body(obj).SetHeader("Content-Type", "application/json").Do(ctx).Error()
}

func (c objectClient) PatchStatus(ctx context.Context, namespace, resource, name string, status []byte) error {
	body := append(append([]byte(`{"status":`), status...), '}')
	return c.rc.Patch(types.MergePatchType).Namespace(namespace).Resource(resource).Name(name).SubResource("status").Body(body).Do(ctx).Error()
}

func (c objectClient) Delete(ctx context.Context, namespace, resource, name string) error {
	return c.rc.Delete().Namespace(namespace).Resource(resource).Name(name).Do(ctx).Error()
}

// BackupSource is the sidecar whose backups the objects show.
type BackupSource interface {
	// Uploader says whether this sidecar writes the backups now: only the
	// uploader keeps the objects and takes the fulls asked for.
	Uploader() bool
	// Full takes a full snapshot now.
	Full(ctx context.Context, final bool) (snapshot.Snapshot, error)
}

// BackupsOptions configures Backups. Client, Namespace, Cluster and Store
// are required.
type BackupsOptions struct {
	Client    ObjectClient
	Namespace string
	// Cluster names the cluster: the objects' label ClusterLabel, their
	// spec.clusterName and their names' prefix; an EtcdBackup whose
	// spec.clusterName is another is left to that cluster's sidecar. A
	// DNS label of at most 40 characters.
	Cluster string
	// Store holds the backups; StoreURL is how the objects name it
	// (without credentials).
	Store    store.Store
	StoreURL string
	// Period: the objects are brought in step with the store this often,
	// besides within a second of Changed. Default 1 min.
	Period time.Duration
	// RequestPeriod: the EtcdBackups are read this often. Default 5 s.
	RequestPeriod time.Duration
	// Timeout bounds each round of calls. Default 1 min.
	Timeout time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger: nil discards.
	Logger *slog.Logger
}

// Backups keeps a store's catalog as Kubernetes objects while its source
// uploads: an EtcdSnapshot per full snapshot, with its chain summed up
// (revisions, deltas, size, the newest restore drill, the write-once
// lock), deleted once retention deleted the full; and it takes the full
// each EtcdBackup asks for, writing where and when it landed. Without the
// objects' CRD, or without the right to write them, it says once why and
// leaves the backups alone.
type Backups struct {
	o       BackupsOptions
	log     *slog.Logger
	changed chan struct{}
	// drills are the drill records read so far, by key: a record is
	// written once and never changes.
	drills map[string]snapshot.DrillRecord

	mu sync.Mutex
	// refused is why the API server refused the objects, last said;
	// failing, that the last round failed otherwise.
	refused string
	failing bool
	// held are the EtcdSnapshots the store called for at the last sync
	// that listed it; nil before one.
	held map[string]bool
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// NewBackups checks the options.
func NewBackups(o BackupsOptions) (*Backups, error) {
	switch {
	case o.Client == nil || o.Namespace == "" || o.Store == nil:
		return nil, errors.New("heartbeat: backup objects need a client, a namespace and a store")
	case !dnsLabel.MatchString(o.Cluster):
		return nil, fmt.Errorf("heartbeat: backup objects' cluster name %q: want a DNS label of at most 40 characters (lower case letters, digits, '-')", o.Cluster)
	}
	if o.Period <= 0 {
		o.Period = time.Minute
	}
	if o.RequestPeriod <= 0 {
		o.RequestPeriod = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// Neither refused nor written yet: the first round says which.
	return &Backups{o: o, log: o.Logger, changed: make(chan struct{}, 1), drills: map[string]snapshot.DrillRecord{}, refused: "unknown"}, nil
}

// Changed says a snapshot landed or went: the objects follow within a
// second.
func (b *Backups) Changed() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// Run keeps the objects while src uploads, until ctx ends.
func (b *Backups) Run(ctx context.Context, src BackupSource) {
	every := time.NewTicker(b.o.Period)
	defer every.Stop()
	requests := time.NewTicker(b.o.RequestPeriod)
	defer requests.Stop()
	for {
		if src.Uploader() {
			b.round(ctx, func(ctx context.Context) error {
				_, err := b.sync(ctx)
				return err
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-every.C:
		case <-b.changed:
			// A burst of snapshots is one round.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		case <-requests.C:
			if !src.Uploader() {
				continue
			}
			// Refused until someone acts (a CRD applied, a Role
			// granted): the objects follow at the next request round
			// once they do.
			if b.refusal() == "" {
				b.round(ctx, func(ctx context.Context) error { return b.answer(ctx, src) })
				continue
			}
		}
	}
}

// round runs one bounded round, saying once why the API server refuses.
func (b *Backups) round(ctx context.Context, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	err := f(ctx)
	why := refusalOf(err)
	b.mu.Lock()
	say := why != b.refused
	b.refused = why
	b.mu.Unlock()
	b.mu.Lock()
	failed := err != nil && why == "" && ctx.Err() == nil
	sayFailed, recovered := failed && !b.failing, err == nil && b.failing
	b.failing = failed
	b.mu.Unlock()
	switch {
	case why != "" && say:
		b.log.Warn("backup objects: not written: " + why)
	case sayFailed:
		// Once: an API server that is down fails every round until it
		// is back.
		b.log.Warn("backup objects: not in step with the store; trying again every round", "error", err)
	case recovered, err == nil && say:
		b.log.Info("backup objects: written", "namespace", b.o.Namespace, "cluster", b.o.Cluster)
	}
}

// refusal is why the API server refused the objects last, "" when it did
// not.
func (b *Backups) refusal() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refused
}

// refusalOf says why the API server will not take the objects until
// someone acts: no CRD, or no right; "" for anything else.
func refusalOf(err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return "the API server does not serve " + BackupGroupVersion.String() + " (apply deploy/kubernetes/etcdsnapshot-crd.yaml, or install the chart's CRDs); the backups go on without them: " + err.Error()
	case apierrors.IsForbidden(err):
		return "the sidecar's service account may not write them (grant get, list, create, delete on etcdsnapshots, get and list on etcdbackups, patch on etcdsnapshots/status and etcdbackups/status in " + BackupGroupVersion.Group + "); the backups go on without them: " + err.Error()
	}
	return ""
}

// EtcdSnapshot is one full snapshot of the store with its chain.
type EtcdSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              EtcdSnapshotSpec   `json:"spec"`
	Status            EtcdSnapshotStatus `json:"status"`
}

// EtcdSnapshotSpec is the full snapshot, as its name in the store says.
type EtcdSnapshotSpec struct {
	ClusterName  string      `json:"clusterName"`
	Store        string      `json:"store"`
	Location     string      `json:"location"`
	Key          string      `json:"key"`
	Timeline     string      `json:"timeline,omitempty"`
	ClusterID    string      `json:"clusterID,omitempty"`
	Revision     int64       `json:"revision"`
	Compression  string      `json:"compression"`
	Encrypted    bool        `json:"encrypted"`
	CreationTime metav1.Time `json:"creationTime"`
}

// EtcdSnapshotStatus is the chain the full begins, as the store holds it
// now.
type EtcdSnapshotStatus struct {
	LastRevision  int64        `json:"lastRevision"`
	Deltas        int          `json:"deltas"`
	SizeBytes     int64        `json:"sizeBytes"`
	Size          string       `json:"size"`
	LastDeltaTime *metav1.Time `json:"lastDeltaTime,omitempty"`
	Latest        bool         `json:"latest"`
	ReadyToUse    bool         `json:"readyToUse"`
	Problem       string       `json:"problem"`
	// LockedUntil and Pin are null when there is none: the status is a
	// merge patch, where a field left out would stay as it was.
	LockedUntil *metav1.Time `json:"lockedUntil"`
	// Pinned: an operator pinned the chain (etcd-backup pin); Pin says
	// with which label, by whom and when.
	Pinned     bool               `json:"pinned"`
	Pin        *PinStatus         `json:"pin"`
	Verified   *Verification      `json:"verified,omitempty"`
	Conditions []metav1.Condition `json:"conditions"`
}

// PinStatus is a chain's pin.
type PinStatus struct {
	Label string      `json:"label,omitempty"`
	By    string      `json:"by,omitempty"`
	Time  metav1.Time `json:"time"`
}

// Verification is the newest restore drill of a chain.
type Verification struct {
	Time     metav1.Time `json:"time"`
	Result   string      `json:"result"`
	Source   string      `json:"source"`
	Revision int64       `json:"revision,omitempty"`
	Compared bool        `json:"compared"`
	Error    string      `json:"error,omitempty"`
}

// sync brings the EtcdSnapshots in step with the store once: one for each
// full snapshot of every timeline, its status as its chain stands;
// those whose full the store no longer lists are deleted (a store that
// does not answer changes nothing: unknown is not absent). It returns the
// objects the store calls for.
func (b *Backups) sync(ctx context.Context) ([]EtcdSnapshot, error) {
	want, err := b.desired(ctx)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, o := range want {
		held[o.Name] = true
	}
	b.mu.Lock()
	b.held = held
	b.mu.Unlock()
	items, err := b.o.Client.List(ctx, b.o.Namespace, etcdSnapshots, ClusterLabel+"="+b.o.Cluster)
	if err != nil {
		return want, fmt.Errorf("list EtcdSnapshots in %s: %w", b.o.Namespace, err)
	}
	have := map[string]EtcdSnapshot{}
	for _, raw := range items {
		var o EtcdSnapshot
		if err := json.Unmarshal(raw, &o); err != nil {
			return want, fmt.Errorf("EtcdSnapshot in %s: %w", b.o.Namespace, err)
		}
		have[o.Name] = o
	}
	var errs []error
	for _, o := range want {
		old, ok := have[o.Name]
		delete(have, o.Name)
		if !ok {
			if err := b.create(ctx, o); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		o.Status.Conditions = keepTransitions(old.Status.Conditions, o.Status.Conditions)
		if ok && sameStatus(old.Status, o.Status) {
			continue
		}
		if err := b.patch(ctx, etcdSnapshots, o.Name, o.Status); err != nil {
			errs = append(errs, err)
		}
	}
	for name, o := range have {
		if o.Spec.Store != b.o.StoreURL {
			continue // another store's: this listing says nothing of it
		}
		if err := b.o.Client.Delete(ctx, b.o.Namespace, etcdSnapshots, name); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete EtcdSnapshot %s/%s: %w", b.o.Namespace, name, err))
			continue
		}
		b.log.Info("backup objects: deleted: the store no longer holds the full", "name", name, "full", o.Spec.Key)
	}
	return want, errors.Join(errs...)
}

func (b *Backups) create(ctx context.Context, o EtcdSnapshot) error {
	body, err := json.Marshal(struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              EtcdSnapshotSpec `json:"spec"`
	}{o.TypeMeta, o.ObjectMeta, o.Spec})
	if err != nil {
		return err
	}
	if err := b.o.Client.Create(ctx, b.o.Namespace, etcdSnapshots, body); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create EtcdSnapshot %s/%s: %w", b.o.Namespace, o.Name, err)
	}
	return nil
}

func (b *Backups) patch(ctx context.Context, resource, name string, status any) error {
	body, err := json.Marshal(status)
	if err != nil {
		return err
	}
	if err := b.o.Client.PatchStatus(ctx, b.o.Namespace, resource, name, body); err != nil {
		return fmt.Errorf("status of %s %s/%s: %w", resource, b.o.Namespace, name, err)
	}
	return nil
}

// desired are the EtcdSnapshots the store's catalog calls for.
func (b *Backups) desired(ctx context.Context) ([]EtcdSnapshot, error) {
	cat, err := snapshot.List(ctx, b.o.Store)
	if err != nil {
		return nil, fmt.Errorf("list the store: %w", err)
	}
	if len(cat.Timelines) == 0 {
		return nil, nil
	}
	latest := ""
	if c, err := cat.Latest(); err == nil {
		latest = c.Full.Key
	}
	drills, err := b.newestDrills(ctx)
	if err != nil {
		return nil, err
	}
	pins, err := snapshot.ReadPins(ctx, b.o.Store)
	if err != nil {
		return nil, err
	}
	first := cat.Timelines[0].ID
	seen := map[string]bool{}
	var out []EtcdSnapshot
	chains := cat.AllChains()
	// A timeline's own chains first: a full a later timeline inherits is
	// shown with the deltas of its own.
	slices.SortStableFunc(chains, func(x, y snapshot.Chain) int {
		return boolOrder(x.Full.Timeline != x.Timeline, y.Full.Timeline != y.Timeline)
	})
	for _, c := range chains {
		if seen[c.Full.Key] {
			continue
		}
		seen[c.Full.Key] = true
		o, err := b.object(ctx, c, first, latest, drills, pins)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func boolOrder(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}

// object is the EtcdSnapshot of chain c.
func (b *Backups) object(ctx context.Context, c snapshot.Chain, first, latest string, drills map[string]snapshot.DrillRecord, pins snapshot.Pins) (EtcdSnapshot, error) {
	full := c.Full
	name := fmt.Sprintf("%s-%d-%d", b.o.Cluster, full.LastRevision, full.Created.Unix())
	if full.Timeline != "" && full.Timeline != first {
		name += "-" + strings.ToLower(full.Timeline[:min(8, len(full.Timeline))])
	}
	o := EtcdSnapshot{
		TypeMeta:   metav1.TypeMeta{APIVersion: BackupGroupVersion.String(), Kind: "EtcdSnapshot"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.o.Namespace, Labels: map[string]string{ClusterLabel: b.o.Cluster, "app.kubernetes.io/managed-by": "etcdkit"}},
		Spec: EtcdSnapshotSpec{ClusterName: b.o.Cluster, Store: b.o.StoreURL, Location: strings.TrimSuffix(b.o.StoreURL, "/") + "/" + full.Key,
			Key: full.Key, Timeline: full.Timeline, Revision: full.LastRevision, Compression: string(full.Compression),
			Encrypted: full.Encrypted, CreationTime: metav1.NewTime(full.Created.UTC())},
	}
	if o.Spec.Compression == "" {
		o.Spec.Compression = "none"
	}
	id, ok, err := snapshot.ReadIdentity(ctx, b.o.Store, full)
	if err != nil {
		return o, fmt.Errorf("identity of %s: %w", full.Key, err)
	}
	if ok {
		o.Spec.ClusterID = id.ClusterID
	}
	st := &o.Status
	st.LastRevision, st.Deltas, st.SizeBytes, st.Latest = c.LastRevision(), len(c.Deltas), full.Size, full.Key == latest
	for _, d := range c.Deltas {
		st.SizeBytes += d.Size
		if st.LastDeltaTime == nil || d.Created.After(st.LastDeltaTime.Time) {
			t := metav1.NewTime(d.Created.UTC())
			st.LastDeltaTime = &t
		}
	}
	st.Size = humanBytes(st.SizeBytes)
	now := metav1.NewTime(b.o.Now())
	if _, err := c.Check(); err != nil {
		st.Problem = err.Error()
		st.Conditions = append(st.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ChainBroken", Message: err.Error(), LastTransitionTime: now})
	} else {
		st.ReadyToUse = true
		st.Conditions = append(st.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ChainWhole",
			Message: fmt.Sprintf("the full and %d deltas restore revisions %d to %d", len(c.Deltas), full.LastRevision, st.LastRevision), LastTransitionTime: now})
	}
	verified := metav1.Condition{Type: "Verified", Status: metav1.ConditionUnknown, Reason: "NotDrilled", Message: "no restore drill of this chain yet", LastTransitionTime: now}
	if r, ok := drills[full.Key]; ok {
		st.Verified = &Verification{Time: metav1.NewTime(r.At.UTC()), Result: string(r.Result), Source: string(r.Source), Revision: r.Revision, Compared: r.Compared, Error: r.Error}
		verified.Status, verified.Reason, verified.Message = metav1.ConditionFalse, "Drill"+titleCase(string(r.Result)), fmt.Sprintf("a %s drill at %s found %s", r.Source, r.At.UTC().Format(time.RFC3339), r.Result)
		if r.Result == snapshot.DrillOK {
			verified.Status = metav1.ConditionTrue
		}
	}
	st.Conditions = append(st.Conditions, verified)
	if p, ok := pins[full.Key]; ok {
		st.Pinned, st.Pin = true, &PinStatus{Label: p.Label, By: p.By, Time: metav1.NewTime(p.Created.UTC())}
	}
	until, err := store.LockedUntil(ctx, b.o.Store, full.Key)
	if err != nil {
		return o, fmt.Errorf("lock of %s: %w", full.Key, err)
	}
	if !until.IsZero() {
		t := metav1.NewTime(until.UTC())
		st.LockedUntil = &t
	}
	return o, nil
}

// newestDrills are the newest drill record of each full, by the full's
// key.
func (b *Backups) newestDrills(ctx context.Context) (map[string]snapshot.DrillRecord, error) {
	objs, err := b.o.Store.List(ctx, "etcdkit/drills/")
	if err != nil {
		return nil, fmt.Errorf("list drill records: %w", err)
	}
	out := map[string]snapshot.DrillRecord{}
	for _, key := range snapshot.DrillKeys(objs) {
		r, ok := b.drills[key]
		if !ok {
			var found bool
			if r, found, err = snapshot.ReadDrill(ctx, b.o.Store, key); err != nil {
				return nil, err
			}
			if !found {
				continue
			}
			b.drills[key] = r
		}
		// Keys sort oldest first: the newest of a full's stays.
		out[r.Full] = r
	}
	return out, nil
}

// keepTransitions keeps the transition time of each condition whose status
// did not change.
func keepTransitions(old, now []metav1.Condition) []metav1.Condition {
	for i, c := range now {
		for _, o := range old {
			if o.Type == c.Type && o.Status == c.Status {
				now[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	return now
}

// sameStatus compares two statuses as the API server stores them.
func sameStatus(a, b EtcdSnapshotStatus) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// humanBytes is n in binary units, as kubectl's columns show it.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// EtcdBackup asks for a full snapshot now; its status is etcd-io/etcd-operator's
// EtcdBackup's.
type EtcdBackup struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ClusterName string `json:"clusterName,omitempty"`
	} `json:"spec"`
	Status EtcdBackupStatus `json:"status"`
}

// EtcdBackupStatus is where and when the full asked for landed.
type EtcdBackupStatus struct {
	Phase             string             `json:"phase,omitempty"`
	StartTime         *metav1.Time       `json:"startTime,omitempty"`
	CompletionTime    *metav1.Time       `json:"completionTime,omitempty"`
	SnapshotLocation  string             `json:"snapshotLocation,omitempty"`
	SnapshotSizeBytes int64              `json:"snapshotSizeBytes,omitempty"`
	Revision          int64              `json:"revision,omitempty"`
	Snapshot          string             `json:"snapshot,omitempty"`
	Message           string             `json:"message,omitempty"`
	Conditions        []metav1.Condition `json:"conditions,omitempty"`
}

// The phases of an EtcdBackup.
const (
	PhaseRunning   = "Running"
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
)

// answer takes the full snapshot each EtcdBackup of this cluster that has
// not ended asks for, oldest first, and writes how it ended. One a
// sidecar began and did not end (it stopped) is taken again.
func (b *Backups) answer(ctx context.Context, src BackupSource) error {
	items, err := b.o.Client.List(ctx, b.o.Namespace, etcdBackups, "")
	if err != nil {
		return fmt.Errorf("list EtcdBackups in %s: %w", b.o.Namespace, err)
	}
	var asked []EtcdBackup
	for _, raw := range items {
		var r EtcdBackup
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("EtcdBackup in %s: %w", b.o.Namespace, err)
		}
		if r.Spec.ClusterName != "" && r.Spec.ClusterName != b.o.Cluster {
			continue
		}
		switch r.Status.Phase {
		case PhaseSucceeded:
			if err := b.gone(ctx, r); err != nil {
				return err
			}
		case PhaseFailed:
		default:
			asked = append(asked, r)
		}
	}
	slices.SortFunc(asked, func(x, y EtcdBackup) int { return x.CreationTimestamp.Compare(y.CreationTimestamp.Time) })
	for _, r := range asked {
		if err := b.take(ctx, src, r); err != nil {
			return err
		}
	}
	return nil
}

// gone says in the status of an EtcdBackup that succeeded when the store
// no longer holds its full (retention deleted it): its phase stays, the
// condition Available turns False.
func (b *Backups) gone(ctx context.Context, r EtcdBackup) error {
	b.mu.Lock()
	held := b.held
	b.mu.Unlock()
	if held == nil || r.Status.Snapshot == "" || held[r.Status.Snapshot] {
		return nil
	}
	if slices.ContainsFunc(r.Status.Conditions, func(c metav1.Condition) bool {
		return c.Type == "Available" && c.Status == metav1.ConditionFalse
	}) {
		return nil // said already
	}
	st := r.Status
	st.Conditions = slices.DeleteFunc(slices.Clone(st.Conditions), func(c metav1.Condition) bool { return c.Type == "Available" })
	st.Message = "the store no longer holds " + st.SnapshotLocation + ": retention deleted it"
	st.Conditions = append(st.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionFalse, Reason: "DeletedByRetention",
		Message: st.Message, LastTransitionTime: metav1.NewTime(b.o.Now())})
	b.log.Info("backup objects: the full an EtcdBackup asked for is gone", "etcdbackup", r.Name, "full", st.SnapshotLocation)
	return b.patch(ctx, etcdBackups, r.Name, st)
}

// take takes the full r asks for.
func (b *Backups) take(ctx context.Context, src BackupSource, r EtcdBackup) error {
	start := metav1.NewTime(b.o.Now())
	st := EtcdBackupStatus{Phase: PhaseRunning, StartTime: &start}
	if err := b.patch(ctx, etcdBackups, r.Name, st); err != nil {
		return err
	}
	b.log.Info("backup objects: a full snapshot asked for", "etcdbackup", r.Name)
	sn, err := src.Full(ctx, false)
	end := metav1.NewTime(b.o.Now())
	st.CompletionTime = &end
	cond := metav1.Condition{Type: "Succeeded", LastTransitionTime: end}
	if err != nil {
		st.Phase, st.Message = PhaseFailed, err.Error()
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "SnapshotFailed", err.Error()
		b.log.Warn("backup objects: the full snapshot asked for failed", "etcdbackup", r.Name, "error", err)
	} else {
		st.Phase = PhaseSucceeded
		st.SnapshotLocation = strings.TrimSuffix(b.o.StoreURL, "/") + "/" + sn.Key
		st.SnapshotSizeBytes, st.Revision = sn.Size, sn.LastRevision
		st.Message = "full snapshot " + sn.Key
		// The EtcdSnapshot that shows it, made now rather than at the
		// next round: a reader of this status finds it.
		want, err := b.sync(ctx)
		if err != nil {
			b.log.Warn("backup objects: not in step with the store", "error", err)
		}
		for _, o := range want {
			if o.Spec.Key == sn.Key {
				st.Snapshot, st.SnapshotSizeBytes = o.Name, o.Status.SizeBytes
			}
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "SnapshotTaken", fmt.Sprintf("full snapshot %s at revision %d", sn.Key, sn.LastRevision)
	}
	st.Conditions = []metav1.Condition{cond}
	if err == nil {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "InTheStore",
			Message: "the store holds " + st.SnapshotLocation, LastTransitionTime: end})
	}
	return b.patch(ctx, etcdBackups, r.Name, st)
}
