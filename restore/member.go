package restore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/config"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/etcdserver/cindex"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/snapshot"
)

// newMember is the member a restored data dir starts as: the cluster of
// one or more members it bootstraps, and the revision bump.
type newMember struct {
	name           string
	peerURLs       []string
	initialCluster string
	token          string
	bump           uint64
	// release is the etcd release that starts the data dir.
	release etcdversion.Version
}

// dbPath is where a data dir keeps its database.
func dbPath(dataDir string) string { return filepath.Join(dataDir, "member", "snap", "db") }

// cluster checks the member against its initial cluster, as etcd does at
// bootstrap, and returns that cluster.
func (m newMember) cluster(lg *zap.Logger) (*membership.RaftCluster, error) {
	urls, err := types.NewURLs(m.peerURLs)
	if err != nil {
		return nil, fmt.Errorf("peer URLs %v: %w", m.peerURLs, err)
	}
	initial, err := types.NewURLsMap(m.initialCluster)
	if err != nil {
		return nil, fmt.Errorf("initial cluster %q: %w", m.initialCluster, err)
	}
	srv := config.ServerConfig{Logger: lg, Name: m.name, PeerURLs: urls, InitialPeerURLsMap: initial, InitialClusterToken: m.token}
	if err := srv.VerifyBootstrap(); err != nil {
		// etcd's words name its own flags; these name the mismatch.
		if mine, ok := initial[m.name]; !ok {
			return nil, fmt.Errorf("the initial cluster %q has no member named %s: name this member in it", m.initialCluster, m.name)
		} else if !slices.Equal(mine.StringSlice(), urls.StringSlice()) {
			return nil, fmt.Errorf("the initial cluster names %s at %s, but its peer URLs are %s: give the same URLs to both (etcd-backup restore: --initial-cluster and --peer-urls)",
				m.name, mine, urls)
		}
		return nil, fmt.Errorf("the initial cluster %q does not fit member %s: %w", m.initialCluster, m.name, err)
	}
	return membership.NewClusterFromURLsMap(lg, m.token, initial)
}

// makeDataDir turns the database a backend holds open at
// dbPath(dataDir) into a member's data dir, where it lies: the steps of
// etcdutl's snapshot restore after its copy of the file (etcd 3.7), which
// the bench's full-only restore compares against etcdutl itself. The old
// members go, what the member's release would refuse goes (fitRelease),
// the new cluster's members are written, the revision is
// bumped and marked compacted when asked, a WAL and a raft snapshot hold
// the membership, and the consistent index points at their last entry.
// rev is the database's revision. The backend is left open; its caller
// closes it and syncs the file.
func makeDataDir(be backend.Backend, dataDir string, rev int64, m newMember) error {
	lg := zap.NewNop()
	cl, err := m.cluster(lg)
	if err != nil {
		return err
	}
	members := schema.NewMembershipBackend(lg, be)
	if err := members.TrimMembershipFromBackend(); err != nil {
		return fmt.Errorf("remove the old members: %w", err)
	}
	// The member is etcd's from now on: a backup of it is etcd's own, whose
	// revisions never skip.
	tx := be.BatchTx()
	tx.LockOutsideApply()
	tx.UnsafeDelete(schema.Meta, []byte(snapshot.LogicalMarker))
	err = fitRelease(tx, m.release)
	tx.Unlock()
	if err != nil {
		return err
	}
	if m.bump > 0 {
		bumped := rev + int64(m.bump)
		tx := be.BatchTx()
		tx.LockOutsideApply()
		// An empty key at the bumped revision is what makes the store
		// open at it; marking it compacted makes watchers of older
		// revisions re-list.
		tx.UnsafePut(schema.Key, mvcc.RevToBytes(mvcc.Revision{Main: bumped}, mvcc.NewRevBytes()), []byte{})
		mvcc.UnsafeSetScheduledCompact(tx, bumped)
		tx.Unlock()
	}
	cl.SetBackend(members)
	for _, member := range cl.Members() {
		cl.AddMember(member, membership.ApplyBoth)
	}
	commit, err := writeWAL(lg, dataDir, m.name, cl)
	if err != nil {
		return err
	}
	cindex.UpdateConsistentIndexForce(be.BatchTx(), commit, 1)
	be.ForceCommit()
	return nil
}

// finishInPlace makes the database a replay left (r; nil: a full alone,
// not opened yet) at dbPath(dataDir) a member's data dir, closes it and
// syncs it.
func finishInPlace(r *replayer, dataDir string, rev int64, m newMember) error {
	db := dbPath(dataDir)
	var be backend.Backend
	var closeAll func() error
	if r != nil {
		r.release()
		be, closeAll = r.b, r.close
	} else {
		be = openBackend(db)
		closeAll = be.Close
	}
	err := makeDataDir(be, dataDir, rev, m)
	if err = errors.Join(err, closeAll()); err != nil {
		return err
	}
	return syncFile(db)
}

// syncFile makes a file written without fsync durable.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// writeWAL writes the WAL and the raft snapshot a new cluster boots from:
// one ConfChangeAddNode entry per member, committed at term 1, and a
// snapshot at the last of them. It returns the commit index.
func writeWAL(lg *zap.Logger, dataDir, name string, cl *membership.RaftCluster) (uint64, error) {
	walDir := filepath.Join(dataDir, "member", "wal")
	snapDir := filepath.Join(dataDir, "member", "snap")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		return 0, err
	}
	self := cl.MemberByName(name)
	if self == nil {
		return 0, fmt.Errorf("member %s is not in the initial cluster", name)
	}
	metadata, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: new(uint64(self.ID)), ClusterID: new(uint64(cl.ID()))})
	if err != nil {
		return 0, err
	}
	w, err := wal.Create(lg, walDir, metadata)
	if err != nil {
		return 0, fmt.Errorf("create the WAL: %w", err)
	}
	defer func() { _ = w.Close() }()
	ids := cl.MemberIDs()
	entries := make([]*raftpb.Entry, len(ids))
	voters := make([]uint64, len(ids))
	for i, id := range ids {
		ctx, err := json.Marshal(cl.Member(id))
		if err != nil {
			return 0, err
		}
		cc, err := proto.Marshal(&raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(id)), Context: ctx})
		if err != nil {
			return 0, err
		}
		voters[i] = uint64(id)
		entries[i] = &raftpb.Entry{Type: raftpb.EntryConfChange.Enum(), Term: new(uint64(1)), Index: new(uint64(i + 1)), Data: cc}
	}
	commit, term := uint64(len(entries)), uint64(1)
	if err := w.Save(&raftpb.HardState{Term: new(term), Vote: new(voters[0]), Commit: new(commit)}, entries); err != nil {
		return 0, fmt.Errorf("write the WAL: %w", err)
	}
	conf := &raftpb.ConfState{Voters: voters}
	if err := snap.New(lg, snapDir).SaveSnap(&raftpb.Snapshot{
		Data:     etcdserver.GetMembershipInfoInV2Format(lg, cl),
		Metadata: &raftpb.SnapshotMetadata{Index: new(commit), Term: new(term), ConfState: conf},
	}); err != nil {
		return 0, fmt.Errorf("write the raft snapshot: %w", err)
	}
	if err := w.SaveSnapshot(&walpb.Snapshot{Index: new(commit), Term: new(term), ConfState: conf}); err != nil {
		return 0, fmt.Errorf("write the WAL's snapshot: %w", err)
	}
	return commit, nil
}

// MemberID is the ID (hex) etcd gives a member of a new cluster named
// name, with peerURLs and the cluster's token: what a restore for it
// builds, and what the backups of its cluster name among their members.
func MemberID(name string, peerURLs []string, token string) (string, error) {
	urls, err := types.NewURLs(peerURLs)
	if err != nil {
		return "", err
	}
	return membership.NewMember(name, urls, token, nil).ID.String(), nil
}
