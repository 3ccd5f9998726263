package snapshot

// WatchEvent is one change of etcd's watch stream, in the shape and JSON of
// etcd's mvccpb.Event (every field omitempty, []byte as base64, the type as
// its number), which is what etcd-backup-restore writes into its deltas.
// The on-store format declares it rather than import etcd's API, so a
// reader of the store links no etcd module; package capture makes it from
// the watch's events, package restore writes it into a database.
type WatchEvent struct {
	Type EventType `json:"type,omitempty"`
	Kv   *KeyValue `json:"kv,omitempty"`
	// PrevKv is the key before the change, when the watch was asked for
	// it; etcdkit's deltas never hold it.
	PrevKv *KeyValue `json:"prev_kv,omitempty"`
}

// EventType is what a change did to its key.
type EventType int32

const (
	// Put created or changed the key.
	Put EventType = 0
	// Delete deleted it.
	Delete EventType = 1
)

func (t EventType) String() string {
	if t == Delete {
		return "DELETE"
	}
	return "PUT"
}

// KeyValue is a key as a revision left it, in the shape and JSON of etcd's
// mvccpb.KeyValue.
type KeyValue struct {
	Key            []byte `json:"key,omitempty"`
	CreateRevision int64  `json:"create_revision,omitempty"`
	ModRevision    int64  `json:"mod_revision,omitempty"`
	Version        int64  `json:"version,omitempty"`
	Value          []byte `json:"value,omitempty"`
	Lease          int64  `json:"lease,omitempty"`
}
