package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// TLSAnnotation is the member lease's annotation that says whether every
// peer URL of the member is https; etcd-druid waits for it when it turns
// peer TLS on.
const TLSAnnotation = "member.etcd.gardener.cloud/tls-enabled"

// Member is what the member lease says of a member.
type Member struct {
	ID, ClusterID uint64
	Leader        bool
	// PeerTLS: every peer URL of the member is https. nil leaves the
	// annotation as it is.
	PeerTLS *bool
}

// HolderIdentity is the member lease's holder identity, as etcd-druid
// parses it.
func (m Member) HolderIdentity() string {
	role := "Member"
	if m.Leader {
		role = "Leader"
	}
	return fmt.Sprintf("%x:%x:%s", m.ID, m.ClusterID, role)
}

// Leases writes Lease objects in one namespace.
type Leases struct {
	// Client reaches the API server's coordination.k8s.io/v1.
	Client Client
	// Namespace holds the leases (POD_NAMESPACE).
	Namespace string
	// Create makes a missing lease. false: a missing lease is an error,
	// as where etcd-druid creates them (its Role for the pods grants no
	// create).
	Create bool
	// Now is the clock of renew times. Default time.Now.
	Now func() time.Time
}

// ErrMissing is a lease that does not exist, where Leases may not create
// it.
var ErrMissing = errors.New("the lease does not exist")

// RenewMember renews the member lease name for m.
func (l *Leases) RenewMember(ctx context.Context, name string, m Member) error {
	return l.update(ctx, name, func(lease *coordinationv1.Lease) bool {
		holder := m.HolderIdentity()
		lease.Spec.HolderIdentity = &holder
		lease.Spec.RenewTime = l.microNow()
		if m.PeerTLS != nil {
			if lease.Annotations == nil {
				lease.Annotations = map[string]string{}
			}
			lease.Annotations[TLSAnnotation] = strconv.FormatBool(*m.PeerTLS)
		}
		return true
	})
}

// UpdateFull records a full snapshot up to revision, taken at taken, in
// the full-snapshot lease name. A lease that names a later full snapshot
// is left alone: another writer (a compaction job) got further.
func (l *Leases) UpdateFull(ctx context.Context, name string, revision int64, taken time.Time) error {
	return l.update(ctx, name, func(lease *coordinationv1.Lease) bool {
		held, ok := heldRevision(lease)
		if ok && held > revision {
			return false
		}
		holder := strconv.FormatInt(revision, 10)
		lease.Spec.HolderIdentity = &holder
		// The snapshot's time, not now: etcd-druid judges a full
		// snapshot's age by it.
		lease.Spec.RenewTime = &metav1.MicroTime{Time: taken}
		return true
	})
}

// UpdateDelta renews the delta-snapshot lease name: now, and revision as
// its holder unless it holds a later one. revision 0 (no delta yet) only
// fills an empty holder.
func (l *Leases) UpdateDelta(ctx context.Context, name string, revision int64) error {
	return l.update(ctx, name, func(lease *coordinationv1.Lease) bool {
		held, ok := heldRevision(lease)
		if !ok || held < revision {
			holder := strconv.FormatInt(revision, 10)
			lease.Spec.HolderIdentity = &holder
		}
		lease.Spec.RenewTime = l.microNow()
		return true
	})
}

// heldRevision is the revision a snapshot lease holds; false when it
// holds none, or something else than a revision, which is then replaced.
func heldRevision(lease *coordinationv1.Lease) (int64, bool) {
	if lease.Spec.HolderIdentity == nil {
		return 0, false
	}
	rev, err := strconv.ParseInt(*lease.Spec.HolderIdentity, 10, 64)
	return rev, err == nil
}

func (l *Leases) microNow() *metav1.MicroTime {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	return &metav1.MicroTime{Time: now()}
}

// update reads the lease, lets change edit it (false: nothing to write)
// and writes it back with the resource version it read, again when
// another writer got in between.
func (l *Leases) update(ctx context.Context, name string, change func(*coordinationv1.Lease) bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := l.Client.Get(ctx, l.Namespace, name)
		if apierrors.IsNotFound(err) && l.Create {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.Namespace}}
			if !change(lease) {
				return nil
			}
			_, err = l.Client.Create(ctx, lease)
			if apierrors.IsAlreadyExists(err) {
				// Created meanwhile: read it and try again.
				return apierrors.NewConflict(coordinationv1.Resource("leases"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if !change(lease) {
			return nil
		}
		_, err = l.Client.Update(ctx, lease)
		return err
	})
	if err != nil {
		return l.explain(name, err)
	}
	return nil
}

// explain names the lease and says what to do about the errors an
// operator can fix.
func (l *Leases) explain(name string, err error) error {
	what := fmt.Sprintf("lease %s/%s", l.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w: create it, or let etcd-druid create it (%w)", what, ErrMissing, err)
	case apierrors.IsForbidden(err) && l.Create:
		return fmt.Errorf("%s: the API server forbids it: give this pod's service account get, update and create "+
			"on leases in group coordination.k8s.io in namespace %s, as deploy/kubernetes/rbac.yaml does (%w)", what, l.Namespace, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: the API server forbids it: give this pod's service account get and update "+
			"on leases in group coordination.k8s.io in namespace %s, as etcd-druid's Role for the pods does (%w)", what, l.Namespace, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the API server does not accept this pod's credentials: check the service account token "+
			"or the kubeconfig (%w)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// logger is l or a discarding one.
func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
