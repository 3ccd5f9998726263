package etcdstorage

import (
	"encoding/json"
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
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/etcdkit/etcdkit/etcdversion"
)

// Member is the member a restored data dir starts as: the cluster of one
// or more members it bootstraps, and the revision bump.
type Member struct {
	Name           string
	PeerURLs       []string
	InitialCluster string
	Token          string
	Bump           uint64
	// Release is the etcd release that starts the data dir.
	Release etcdversion.Version
	// DropMeta are keys of the meta bucket that go: what a restore marks
	// that the member's etcd must not keep.
	DropMeta [][]byte
}

// Check checks the member against its initial cluster, as etcd does at
// bootstrap.
func (m Member) Check() error {
	_, err := m.cluster(zap.NewNop())
	return err
}

// ClusterID is the ID (hex) etcd gives a new cluster of initialCluster
// with token.
func ClusterID(initialCluster, token string) (string, error) {
	urls, err := types.NewURLsMap(initialCluster)
	if err != nil {
		return "", err
	}
	cl, err := membership.NewClusterFromURLsMap(zap.NewNop(), token, urls)
	if err != nil {
		return "", err
	}
	return cl.ID().String(), nil
}

// cluster checks the member against its initial cluster, as etcd does at
// bootstrap, and returns that cluster.
func (m Member) cluster(lg *zap.Logger) (*membership.RaftCluster, error) {
	urls, err := types.NewURLs(m.PeerURLs)
	if err != nil {
		return nil, fmt.Errorf("peer URLs %v: %w", m.PeerURLs, err)
	}
	initial, err := types.NewURLsMap(m.InitialCluster)
	if err != nil {
		return nil, fmt.Errorf("initial cluster %q: %w", m.InitialCluster, err)
	}
	srv := config.ServerConfig{Logger: lg, Name: m.Name, PeerURLs: urls, InitialPeerURLsMap: initial, InitialClusterToken: m.Token}
	if err := srv.VerifyBootstrap(); err != nil {
		// etcd's words name its own flags; these name the mismatch.
		if mine, ok := initial[m.Name]; !ok {
			return nil, fmt.Errorf("the initial cluster %q has no member named %s: name this member in it", m.InitialCluster, m.Name)
		} else if !slices.Equal(mine.StringSlice(), urls.StringSlice()) {
			return nil, fmt.Errorf("the initial cluster names %s at %s, but its peer URLs are %s: give the same URLs to both (etcd-backup restore: --initial-cluster and --peer-urls)",
				m.Name, mine, urls)
		}
		return nil, fmt.Errorf("the initial cluster %q does not fit member %s: %w", m.InitialCluster, m.Name, err)
	}
	return membership.NewClusterFromURLsMap(lg, m.Token, initial)
}

// MakeDataDir turns the database b holds open at member/snap/db of
// dataDir into a member's data dir, where it lies: the steps of
// etcdutl's snapshot restore after its copy of the file (etcd 3.7), which
// the bench's full-only restore compares against etcdutl itself. The old
// members go, what the member's release would refuse goes (fitRelease),
// the new cluster's members are written, the revision is
// bumped and marked compacted when asked, a WAL and a raft snapshot hold
// the membership, and the consistent index points at their last entry.
// rev is the database's revision. The backend is left open; its caller
// closes it and syncs the file (SyncFile).
func (b *Backend) MakeDataDir(dataDir string, rev int64, m Member) error {
	b.Unlock()
	be := b.be
	lg := zap.NewNop()
	cl, err := m.cluster(lg)
	if err != nil {
		return err
	}
	members := schema.NewMembershipBackend(lg, be)
	if err := members.TrimMembershipFromBackend(); err != nil {
		return fmt.Errorf("remove the old members: %w", err)
	}
	tx := be.BatchTx()
	tx.LockOutsideApply()
	for _, k := range m.DropMeta {
		tx.UnsafeDelete(schema.Meta, k)
	}
	err = fitRelease(tx, m.Release)
	tx.Unlock()
	if err != nil {
		return err
	}
	if m.Bump > 0 {
		bumped := rev + int64(m.Bump)
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
	commit, err := writeWAL(lg, dataDir, m.Name, cl)
	if err != nil {
		return err
	}
	cindex.UpdateConsistentIndexForce(be.BatchTx(), commit, 1)
	be.ForceCommit()
	return nil
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
