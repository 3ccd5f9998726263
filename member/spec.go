package member

import "strings"

// etcd's own defaults for a member's flags, used wherever a member is
// described and a value is not given: restores, start-ups, the sidecar's
// API and the command lines.
const (
	// DefaultName is --name's.
	DefaultName = "default"
	// DefaultPeerURL is --initial-advertise-peer-urls'.
	DefaultPeerURL = "http://localhost:2380"
	// DefaultToken is --initial-cluster-token's.
	DefaultToken = "etcd-cluster"
)

// Spec is one member as etcd's flags describe it: what a restore builds a
// data dir for and a start-up checks one against. The zero value of each
// field is etcd's default (WithDefaults).
type Spec struct {
	// Name is --name. Default DefaultName.
	Name string
	// DataDir is --data-dir.
	DataDir string
	// WALDir is --wal-dir; "": the data dir's member/wal.
	WALDir string
	// PeerURLs are --initial-advertise-peer-urls. Default DefaultPeerURL.
	PeerURLs []string
	// InitialCluster is --initial-cluster. Default Name=PeerURLs.
	InitialCluster string
	// Token is --initial-cluster-token. Default DefaultToken.
	Token string
}

// WithDefaults is s with etcd's defaults where it gives nothing.
func (s Spec) WithDefaults() Spec {
	if s.Name == "" {
		s.Name = DefaultName
	}
	if len(s.PeerURLs) == 0 {
		s.PeerURLs = []string{DefaultPeerURL}
	}
	if s.InitialCluster == "" {
		parts := make([]string, len(s.PeerURLs))
		for i, u := range s.PeerURLs {
			parts[i] = s.Name + "=" + u
		}
		s.InitialCluster = strings.Join(parts, ",")
	}
	if s.Token == "" {
		s.Token = DefaultToken
	}
	return s
}
