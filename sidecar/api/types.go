package api

import "time"

// MaxBody bounds request and answer bodies: they are small JSON documents.
const MaxBody = 1 << 20

// ForwardedHeader marks a call a follower's sidecar forwarded to the
// uploader's, so it is never forwarded twice.
const ForwardedHeader = "X-Etcdkit-Forwarded"

// SnapshotView is a snapshot as the API shows it.
type SnapshotView struct {
	Key           string    `json:"key"`
	Kind          string    `json:"kind"`
	StartRevision int64     `json:"start_revision"`
	LastRevision  int64     `json:"last_revision"`
	Created       time.Time `json:"created"`
	Size          int64     `json:"size"`
	Compression   string    `json:"compression,omitempty"`
	Encrypted     bool      `json:"encrypted,omitempty"`
	// LockedUntil is when the object's write-once lock ends, where the
	// store tells (etcd-backup list); zero: no lock known.
	LockedUntil time.Time `json:"locked_until,omitzero"`
}

// TimelineView is one history of the store's backups: the first, or one
// that forked from another (see snapshot.Timeline).
type TimelineView struct {
	ID    string    `json:"id"`
	Began time.Time `json:"began,omitzero"`
	// Parent is the timeline it forked from, ForkRevision the last
	// revision they share (0: none known), ForkSnapshot the parent's full
	// snapshot it was restored from.
	Parent       string `json:"parent,omitempty"`
	ForkRevision int64  `json:"fork_revision,omitempty"`
	ForkSnapshot string `json:"fork_snapshot,omitempty"`
	ClusterID    string `json:"cluster_id,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Newest: restores, time travel and verify read this one by default.
	Newest bool `json:"newest,omitempty"`
	// SetAside: a record that is not one of the store's timelines (Reason
	// says why); the snapshots are placed as if it were not there.
	SetAside bool `json:"set_aside,omitempty"`
}

// ChainView is a full snapshot and its deltas.
type ChainView struct {
	// Timeline is the ID of the timeline the chain belongs to.
	Timeline string `json:"timeline"`
	// ClusterID is the cluster the chain was taken of (hex), "" when the
	// chain has no identity record.
	ClusterID    string         `json:"cluster_id,omitempty"`
	Full         SnapshotView   `json:"full"`
	Deltas       []SnapshotView `json:"deltas"`
	LastRevision int64          `json:"last_revision"`
	Size         int64          `json:"size"`
	// Pin, when set, keeps the chain whatever the retention.
	Pin *PinView `json:"pin,omitempty"`
}

// PinView is a chain's pin: an operator's mark that keeps it whatever
// the retention.
type PinView struct {
	Snapshot string    `json:"snapshot"`
	Label    string    `json:"label,omitempty"`
	Created  time.Time `json:"created"`
	By       string    `json:"by,omitempty"`
}

// Member is a member as the requests name it: etcd's member flags.
type Member struct {
	// DataDir must lie under the sidecar's restore root.
	DataDir string `json:"data_dir"`
	// WALDir is etcd's wal-dir, when the WAL is kept outside the data
	// dir; under the restore root too.
	WALDir   string   `json:"wal_dir,omitempty"`
	Name     string   `json:"name,omitempty"`
	PeerURLs []string `json:"peer_urls,omitempty"`
	// InitialCluster and InitialClusterToken, as etcd's flags take them.
	InitialCluster      string `json:"initial_cluster,omitempty"`
	InitialClusterToken string `json:"initial_cluster_token,omitempty"`
}

// ValidateRequest asks the sidecar for a data dir's verdict and what its
// store holds: the facts a start-up decides from (POST /v1/validate).
type ValidateRequest struct {
	// Member is the member whose data dir is judged. Its InitialCluster,
	// when it lists other members, says their peers bring this one up to
	// date, so a data dir behind the backups is not Behind. Embedded: its
	// fields are the request's own on the wire.
	Member
	// Sanity runs the quick checks only (the member stopped cleanly);
	// default the full ones.
	Sanity bool `json:"sanity,omitempty"`
	// EtcdVersion is the etcd release that is to start on the data dir
	// (3.5.35): another release's data it cannot start on is
	// OtherVersion. "": the sidecar's own etcd release.
	EtcdVersion string `json:"etcd_version,omitempty"`
}

// Validation answers a ValidateRequest.
type Validation struct {
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	File    string `json:"file,omitempty"`
	// Revision is the data dir's; BackupRevision the newest the backups
	// hold, 0 without Backups.
	Revision       int64 `json:"revision"`
	Backups        bool  `json:"backups"`
	BackupRevision int64 `json:"backup_revision,omitempty"`
	// Release is the etcd release the data dir was last run at (3.5),
	// when it holds a member.
	Release string `json:"release,omitempty"`
}

// RestoreRequest asks the sidecar to build a member's data dir
// (POST /v1/restore).
type RestoreRequest struct {
	// Member is the member the data dir is built for. Embedded: its
	// fields are the request's own on the wire.
	Member
	// EtcdVersion is the etcd release that is to start the restored data
	// dir: the restore writes for it. "": the sidecar's own.
	EtcdVersion string `json:"etcd_version,omitempty"`
	// Revision or Time pick a point to restore; neither: the latest.
	Revision int64     `json:"revision,omitempty"`
	Time     time.Time `json:"time,omitzero"`
	// IfNeeded has the sidecar run the start-up decision first (Name,
	// PeerURLs and InitialCluster are the member's, as for a restore) and
	// restore only when it says so; the job's action says what was
	// decided. A member of a running cluster never restores: the job
	// then names the membership action the caller carries out.
	IfNeeded bool `json:"if_needed,omitempty"`
	// Endpoints reach the other members' client URLs, for IfNeeded to
	// ask whether a cluster runs. None: a multi-member cluster is taken
	// as not running.
	Endpoints []string `json:"endpoints,omitempty"`
	// RevisionBump raises the restored revision by this much. 0: past
	// any revision the lost cluster may have served, as estimated from
	// the store's deltas, unless KeepRevision. Either way a bumped
	// revision is marked compacted, so watchers list again.
	RevisionBump uint64 `json:"revision_bump,omitempty"`
	KeepRevision bool   `json:"keep_revision,omitempty"`
}

// JobState is where a restore job is.
type JobState string

const (
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
)

// Job is a restore requested through the API. Reading it changes
// nothing: a caller may poll it as often as it likes.
type Job struct {
	ID      string         `json:"id"`
	State   JobState       `json:"state"`
	Request RestoreRequest `json:"request"`
	// Verdict is the data dir's, when the request asked to restore only
	// if needed.
	Verdict string `json:"verdict,omitempty"`
	// Action is what the start-up decided and the job did: "none" (the
	// data dir is fit to start on, or to bootstrap), "restored", or what
	// the caller must do ("rejoin", "join-as-learner").
	Action string `json:"action,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Revision restored; Revisions replayed from deltas; RevisionBump
	// how far the restored revision was raised past Revision.
	Revision     int64     `json:"revision,omitempty"`
	Revisions    int64     `json:"revisions,omitempty"`
	RevisionBump uint64    `json:"revision_bump,omitempty"`
	Error        string    `json:"error,omitempty"`
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished,omitzero"`
	// Progress while running.
	BytesDownloaded int64 `json:"bytes_downloaded"`
	BytesTotal      int64 `json:"bytes_total"`
	Replayed        int64 `json:"replayed"`
}

// Health answers GET /healthz: the sidecar serves.
type Health struct {
	Status string `json:"status"`
}

// RestoreStarted answers POST /v1/restore: the job's ID and where to ask
// how it goes.
type RestoreStarted struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// ErrorBody is the answer of every call that fails.
type ErrorBody struct {
	Error string `json:"error"`
}

// Readiness answers GET /readyz: whether the member answers and, while
// this sidecar uploads, whether its backups succeed.
type Readiness struct {
	Ready    bool   `json:"ready"`
	Uploader bool   `json:"uploader"`
	MemberID string `json:"member_id"`
	Learner  bool   `json:"learner"`
	// Error says why the sidecar is not ready; Refused names the check
	// that refused the backups ("other-cluster", "conflict", …): waiting
	// does not help.
	Error   string `json:"error,omitempty"`
	Refused string `json:"refused,omitempty"`
	// MemberRemoved says why the member stays out: the cluster removed it
	// on purpose, as its data dir says.
	MemberRemoved string `json:"member_removed,omitempty"`
	// Uploading is there while this sidecar uploads and has a store.
	*Uploading
	// Secondary is the second site's state, while this sidecar uploads
	// and copies to one.
	Secondary *SecondaryState `json:"secondary,omitempty"`
	// WriteOnce is whether the store refuses deletes, once this sidecar
	// has asked it (while it uploads).
	WriteOnce *WriteOnceState `json:"write_once,omitempty"`
}

// WriteOnceState is the last answer to whether the store refuses deletes:
// the delete of Probe was refused (a write-once lock holds) or not, at
// Checked; Error when the question failed.
type WriteOnceState struct {
	DeletesRefused bool      `json:"deletes_refused"`
	Probe          string    `json:"probe,omitempty"`
	Checked        time.Time `json:"checked"`
	Error          string    `json:"error,omitempty"`
}

// SecondaryState is how far the second site is behind the store: the
// oldest snapshot it lacks has waited LagSeconds (0: it holds them all),
// the last copy that left it complete began at LastSync, and the last
// copy's error, if it failed.
type SecondaryState struct {
	Store      string    `json:"store"`
	LagSeconds float64   `json:"lag_seconds"`
	LastSync   time.Time `json:"last_sync,omitzero"`
	LastError  string    `json:"last_error,omitempty"`
}

// Uploading is the uploader's state, in Readiness.
type Uploading struct {
	Backup        BackupState `json:"backup"`
	LastRevision  int64       `json:"last_revision"`
	PendingEvents int         `json:"pending_events"`
	Failures      int         `json:"failures"`
}

// BackupState is how the uploader's backups go: State "ok", "failing"
// (attempts fail and are retried) or "stopped" (the Snapshotter stopped,
// and no snapshot has succeeded since it was started again); since when
// they have not succeeded, and why.
type BackupState struct {
	State               string    `json:"state"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	FailingSince        time.Time `json:"failing_since,omitzero"`
	LastError           string    `json:"last_error,omitempty"`
	FailingSeconds      float64   `json:"failing_seconds,omitempty"`
}

// Snapshots answers GET /v1/snapshots: every chain, oldest first, and the
// timelines they belong to.
type Snapshots struct {
	Chains    []ChainView    `json:"chains"`
	Timelines []TimelineView `json:"timelines"`
}

// Latest answers GET /v1/snapshots/latest: the newest timeline's newest
// chain; Problem says why it cannot be restored as it is.
type Latest struct {
	Chain        ChainView `json:"chain"`
	LastRevision int64     `json:"last_revision"`
	Problem      string    `json:"problem,omitempty"`
}

// Compaction answers POST /v1/compact: the new full snapshot, or the
// chain's own with Unchanged (it had no deltas).
type Compaction struct {
	Snapshot    SnapshotView `json:"snapshot"`
	Revisions   int64        `json:"revisions"`
	InputBytes  int64        `json:"input_bytes"`
	OutputBytes int64        `json:"output_bytes"`
	TookSeconds float64      `json:"took_seconds"`
	Unchanged   bool         `json:"unchanged"`
}
