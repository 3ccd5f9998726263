package etcdstorage

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"

	"go.etcd.io/etcd/server/v3/etcdserver/api/snap"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v2error"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v2store"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// Log is the membership a stopped member's raft log holds: etcd 3.5's v2
// store at the newest raft snapshot the WAL names, and the membership
// changes the WAL holds after it.
type Log struct {
	// Snapshot maps the v2 store's member IDs to their names ("" when
	// the record names none); empty when no snapshot was taken yet, and
	// the whole log is the membership.
	Snapshot map[uint64]string
	Changes  []ConfChange
}

// ConfChange is one membership change of the log.
type ConfChange struct {
	Index uint64
	ID    uint64
	// Name is the added member's, when its record names it.
	Name   string
	Remove bool
}

// ReadLog reads the log of the member whose snap files are in snapDir and
// whose WAL is in walDir, read only.
func ReadLog(snapDir, walDir string) (Log, error) {
	lg := zap.NewNop()
	walSnaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return Log{}, fmt.Errorf("wal %s: %w", walDir, err)
	}
	at := &walpb.Snapshot{}
	var v2Data []byte
	rs, err := newestSnap(lg, snapDir, walSnaps)
	switch {
	case err != nil:
		return Log{}, err
	case rs != nil:
		v2Data = rs.GetData()
		index, term := rs.GetMetadata().GetIndex(), rs.GetMetadata().GetTerm()
		at.Index, at.Term = &index, &term
	}
	out := Log{}
	if out.Snapshot, err = v2Members(v2Data); err != nil {
		return Log{}, fmt.Errorf("snap %s: %w", snapDir, err)
	}
	w, err := wal.OpenForRead(lg, walDir, at)
	if err != nil {
		return Log{}, fmt.Errorf("wal %s: %w", walDir, err)
	}
	_, _, ents, err := w.ReadAll()
	_ = w.Close()
	if err != nil {
		return Log{}, fmt.Errorf("wal %s: %w (stop the member first: a running one writes it)", walDir, err)
	}
	for _, e := range ents {
		if e.GetType() != raftpb.EntryType_EntryConfChange {
			continue
		}
		var cc raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			return Log{}, fmt.Errorf("wal %s: conf change at index %d: %w", walDir, e.GetIndex(), err)
		}
		c := ConfChange{Index: e.GetIndex(), ID: cc.GetNodeId()}
		switch cc.GetType() {
		case raftpb.ConfChangeType_ConfChangeAddNode, raftpb.ConfChangeType_ConfChangeAddLearnerNode:
			var a struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(cc.GetContext(), &a)
			c.Name = a.Name
		case raftpb.ConfChangeType_ConfChangeRemoveNode:
			c.Remove = true
		default:
			continue
		}
		out.Changes = append(out.Changes, c)
	}
	return out, nil
}

// newestSnap is the newest snap file the WAL names, as etcd picks it at
// start, read only: etcd's own loader renames a file it cannot read and
// removes temporary databases, and a check changes nothing. nil when the
// WAL names none that reads.
func newestSnap(lg *zap.Logger, dir string, walSnaps []*walpb.Snapshot) (*raftpb.Snapshot, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	if err != nil {
		return nil, fmt.Errorf("snap %s: %w", dir, err)
	}
	slices.Sort(names)
	for _, name := range slices.Backward(names) {
		s, err := snap.Read(lg, name)
		if err != nil {
			continue
		}
		for _, w := range walSnaps {
			if w.GetIndex() == s.GetMetadata().GetIndex() && w.GetTerm() == s.GetMetadata().GetTerm() {
				return s, nil
			}
		}
	}
	return nil, nil
}

// v2Members reads etcd 3.5's v2 membership from the v2 store a raft
// snapshot holds (nil data: none was taken yet).
func v2Members(data []byte) (map[uint64]string, error) {
	out := map[uint64]string{}
	if len(data) == 0 {
		return out, nil
	}
	st := v2store.New()
	if err := st.Recovery(data); err != nil {
		return nil, fmt.Errorf("the v2 store: %w", err)
	}
	ev, err := st.Get("/0/members", true, true)
	if err != nil {
		var e *v2error.Error
		if errors.As(err, &e) && e.ErrorCode == v2error.EcodeKeyNotFound {
			return out, nil
		}
		return nil, fmt.Errorf("the v2 store's members: %w", err)
	}
	for _, n := range ev.Node.Nodes {
		id, err := strconv.ParseUint(path.Base(n.Key), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("the v2 store's member %q: %w", n.Key, err)
		}
		name := ""
		for _, attr := range n.Nodes {
			if path.Base(attr.Key) == "attributes" && attr.Value != nil {
				var a struct {
					Name string `json:"name"`
				}
				_ = json.Unmarshal([]byte(*attr.Value), &a)
				name = a.Name
			}
		}
		out[id] = name
	}
	return out, nil
}
