package heartbeat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/etcdkit/etcdkit/member"
	"github.com/etcdkit/etcdkit/snapshot"
)

// EtcdMemberGroupVersion is where etcd-druid's DEP-04 puts EtcdMember.
var EtcdMemberGroupVersion = schema.GroupVersion{Group: "druid.gardener.cloud", Version: "v1alpha1"}

// StatusClient reads and writes EtcdMember objects (DEP-04), as JSON.
type StatusClient interface {
	// Get reads the object's status; ok is false when there is none.
	Get(ctx context.Context, namespace, name string) (status MemberStatus, ok bool, err error)
	// Create makes the object, without a status.
	Create(ctx context.Context, namespace, name string) error
	// PatchStatus merges status into the object's status subresource.
	PatchStatus(ctx context.Context, namespace, name string, status []byte) error
}

// NewStatusClient is a client of the API server's EtcdMember objects,
// with userAgent; timeout as NewClient's.
func NewStatusClient(cfg *rest.Config, userAgent string, timeout time.Duration) (StatusClient, error) {
	rc, err := restClientFor(cfg, EtcdMemberGroupVersion, userAgent, timeout, nil)
	if err != nil {
		return nil, err
	}
	return statusClient{rc}, nil
}

type statusClient struct{ rc *rest.RESTClient }

const etcdMembers = "etcdmembers"

func (c statusClient) Get(ctx context.Context, namespace, name string) (MemberStatus, bool, error) {
	b, err := c.rc.Get().Namespace(namespace).Resource(etcdMembers).Name(name).Do(ctx).Raw()
	switch {
	case apierrors.IsNotFound(err):
		return MemberStatus{}, false, nil
	case err != nil:
		return MemberStatus{}, false, err
	}
	var obj struct {
		Status MemberStatus `json:"status"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return MemberStatus{}, false, fmt.Errorf("EtcdMember %s/%s: %w", namespace, name, err)
	}
	return obj.Status, true, nil
}

func (c statusClient) Create(ctx context.Context, namespace, name string) error {
	body, err := json.Marshal(map[string]any{"apiVersion": EtcdMemberGroupVersion.String(), "kind": "EtcdMember",
		"metadata": map[string]any{"name": name, "namespace": namespace}})
	if err != nil {
		return err
	}
	return c.rc.Post().Namespace(namespace).Resource(etcdMembers).Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Error()
}

func (c statusClient) PatchStatus(ctx context.Context, namespace, name string, status []byte) error {
	body := append(append([]byte(`{"status":`), status...), '}')
	return c.rc.Patch(types.MergePatchType).Namespace(namespace).Resource(etcdMembers).Name(name).SubResource("status").Body(body).Do(ctx).Error()
}

// MemberStatus is EtcdMember's status as DEP-04 shapes it, as far as the
// sidecar knows it.
type MemberStatus struct {
	ID                  string           `json:"id,omitempty"`
	ClusterID           string           `json:"clusterID,omitempty"`
	PeerTLSEnabled      *bool            `json:"peerTLSEnabled,omitempty"`
	Snapshots           *Snapshots       `json:"snapshots,omitempty"`
	LastRestoration     *Restoration     `json:"lastRestoration,omitempty"`
	LastDefragmentation *Defragmentation `json:"lastDefragmentation,omitempty"`
	Transitions         []Transition     `json:"transitions"`
}

// Snapshots are the latest full and delta snapshots the member's sidecar
// uploaded.
type Snapshots struct {
	LastFull  *SnapshotRef `json:"lastFull,omitempty"`
	LastDelta *SnapshotRef `json:"lastDelta,omitempty"`
}

// SnapshotRef is one snapshot.
type SnapshotRef struct {
	Timestamp     time.Time `json:"timestamp"`
	Name          string    `json:"name"`
	StartRevision int64     `json:"startRevision"`
	EndRevision   int64     `json:"endRevision"`
}

// Restoration is the latest restore the sidecar ran.
type Restoration struct {
	Type      string    `json:"type"`
	Status    string    `json:"status"`
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
	Message   string    `json:"message,omitempty"`
}

// Defragmentation is the latest defragmentation the sidecar ran.
type Defragmentation struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// Transition is one change of the member's state.
type Transition struct {
	State          string    `json:"state"`
	SubState       string    `json:"subState,omitempty"`
	Reason         string    `json:"reason"`
	TransitionTime time.Time `json:"transitionTime"`
	Message        string    `json:"message,omitempty"`
}

// maxTransitions bounds the transitions kept: the newest.
const maxTransitions = 20

// Operation is a restore or defragmentation the sidecar ran, for the
// EtcdMember's status (Heartbeat.Ran).
type Operation struct {
	// Name: "restore" or "defrag"; others are not recorded.
	Name       string
	Start, End time.Time
	Err        error
}

// memberState keeps the EtcdMember's status between two ticks.
type memberState struct {
	h       *Heartbeat
	src     Source
	w       *writer
	status  MemberStatus
	role    string // the last transition's sub-state
	written []byte
	due     time.Time
	created bool
}

// etcdMember writes the EtcdMember's status every period, and at once
// when the member's state changes.
func (h *Heartbeat) etcdMember(ctx context.Context, src Source) {
	s := &memberState{h: h, src: src, w: h.writer(KindEtcdMember, h.o.Period)}
	tick := time.NewTicker(min(time.Second, h.o.Period))
	defer tick.Stop()
	for {
		s.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// role is the DEP-04 state and sub-state of what the member said, with
// the reason of a transition into it from the previous sub-state.
func role(self member.Self, previous string) (state, sub, reason string) {
	switch {
	case self.Learner:
		return "Starting", "Learner", "JoinedAsLearner"
	case self.IsLeader():
		return "Started", "Leader", "GainedClusterLeadership"
	case previous == "Learner":
		return "Started", "Follower", "PromotedAsVotingMember"
	case previous == "Leader":
		return "Started", "Follower", "LostClusterLeadership"
	}
	return "Started", "Follower", "MemberStarted"
}

func (s *memberState) once(ctx context.Context) {
	now := time.Now()
	if self, err := s.src.Member(); err == nil && self.ID != 0 {
		s.status.ID, s.status.ClusterID = fmt.Sprintf("%x", self.ID), fmt.Sprintf("%x", self.ClusterID)
		if state, sub, reason := role(self, s.role); sub != s.role {
			s.status.Transitions = append(s.status.Transitions, Transition{State: state, SubState: sub, Reason: reason, TransitionTime: now.UTC().Truncate(time.Second)})
			s.status.Transitions = s.status.Transitions[max(0, len(s.status.Transitions)-maxTransitions):]
			s.role = sub
		}
	}
	if s.src.Uploader() {
		st := s.src.SnapshotStatus()
		s.status.Snapshots = &Snapshots{LastFull: ref(st.LastFull), LastDelta: ref(st.LastDelta)}
	}
	s.h.mu.Lock()
	s.status.LastRestoration, s.status.LastDefragmentation = s.h.restoration, s.h.defragmentation
	s.h.mu.Unlock()
	body, err := json.Marshal(s.status)
	if err != nil || (bytes.Equal(body, s.written) && now.Before(s.due)) || s.status.ID == "" {
		return
	}
	if s.w.write(ctx, func(ctx context.Context) error { return s.write(ctx, &body) }) != nil {
		s.due = now.Add(s.w.backoff)
		return
	}
	s.written, s.due = body, now.Add(s.h.o.Period)
}

// write patches the status, making the object first when it is missing
// and Create allows.
func (s *memberState) write(ctx context.Context, body *[]byte) error {
	c, ns, name := s.h.o.StatusClient, s.h.o.Namespace, s.h.o.EtcdMember
	if !s.created {
		old, ok, err := c.Get(ctx, ns, name)
		if err != nil {
			return fmt.Errorf("EtcdMember %s/%s: %w", ns, name, err)
		}
		// The transitions of the sidecar's earlier runs come first: the
		// status is the member's history, not this run's.
		s.status.Transitions = append(old.Transitions, s.status.Transitions...)
		s.status.Transitions = s.status.Transitions[max(0, len(s.status.Transitions)-maxTransitions):]
		if *body, err = json.Marshal(s.status); err != nil {
			return err
		}
		if !ok && !s.h.o.Create {
			return fmt.Errorf("EtcdMember %s/%s does not exist: etcd-druid makes it", ns, name)
		}
		if !ok {
			if err := c.Create(ctx, ns, name); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create EtcdMember %s/%s: %w", ns, name, err)
			}
		}
		s.created = true
	}
	if err := c.PatchStatus(ctx, ns, name, *body); err != nil {
		return fmt.Errorf("EtcdMember %s/%s: status: %w", ns, name, err)
	}
	return nil
}

func ref(s snapshot.Snapshot) *SnapshotRef {
	if s.Key == "" {
		return nil
	}
	return &SnapshotRef{Timestamp: s.Created, Name: s.Key, StartRevision: s.StartRevision, EndRevision: s.LastRevision}
}

// Ran records a restore or defragmentation the sidecar ran, for the
// EtcdMember's status.
func (h *Heartbeat) Ran(op Operation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	status, msg := "Success", ""
	if op.Err != nil {
		status, msg = "Failed", op.Err.Error()
	}
	switch op.Name {
	case "restore":
		h.restoration = &Restoration{Type: "FromSnapshot", Status: status, StartTime: op.Start.UTC(), EndTime: op.End.UTC(), Message: msg}
	case "defrag":
		h.defragmentation = &Defragmentation{StartTime: op.Start.UTC(), EndTime: op.End.UTC(), Reason: "Scheduled", Message: msg}
	}
}
