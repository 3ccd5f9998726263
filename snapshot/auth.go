package snapshot

// Auth is etcd's authentication state as a delta records it: users and
// roles change outside the keyspace, so the watch never carries them.
// etcd never tells a user's password, so none is recorded: a restore keeps
// the password of a user its full snapshot holds, and a user made since
// has none until one is set.
type Auth struct {
	Enabled bool `json:"enabled"`
	// Revision is etcd's auth revision, raised by every change.
	Revision uint64     `json:"revision"`
	Users    []AuthUser `json:"users"`
	Roles    []AuthRole `json:"roles"`
}

// AuthUser is a user and the roles granted to it.
type AuthUser struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles,omitempty"`
}

// AuthRole is a role and its permissions.
type AuthRole struct {
	Name        string           `json:"name"`
	Permissions []AuthPermission `json:"permissions,omitempty"`
}

// AuthPermission is one key or range a role may read, write or both.
type AuthPermission struct {
	// Type is READ, WRITE or READWRITE.
	Type     string `json:"type"`
	Key      []byte `json:"key"`
	RangeEnd []byte `json:"rangeEnd,omitempty"`
}
