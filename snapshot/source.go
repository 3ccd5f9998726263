package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/internal/dbstream"
)

// SourceKind names what a backup is taken of.
type SourceKind string

const (
	// SourceEtcd is an etcd cluster: fulls are the databases its
	// Maintenance.Snapshot streams.
	SourceEtcd SourceKind = "etcd"
	// SourceEtcdAPI is any datastore that serves etcd's KV and Watch API
	// without its snapshot RPC (kine over SQLite, Postgres, MySQL or NATS):
	// fulls are logical, built here from a Range at one revision.
	SourceEtcdAPI SourceKind = "etcd-api"
)

// ParseSourceKind reads a --source flag; "" is SourceEtcd.
func ParseSourceKind(s string) (SourceKind, error) {
	switch SourceKind(s) {
	case "", SourceEtcd:
		return SourceEtcd, nil
	case SourceEtcdAPI:
		return SourceEtcdAPI, nil
	}
	return "", fmt.Errorf("source %q: give %q (an etcd cluster) or %q (a datastore that serves etcd's API, such as kine)", s, SourceEtcd, SourceEtcdAPI)
}

// Source is what a backup needs from its datastore. Chains, codecs,
// retention, the catalog and restore are the same whatever the source:
// every full is an etcd database and every delta the Watch API's events.
type Source interface {
	// Kind says which source it is.
	Kind() SourceKind
	// Full streams an etcd database of the whole keyspace at one revision,
	// followed by its SHA-256, as etcd's Maintenance.Snapshot does. Closing
	// it ends the stream and releases what it holds.
	Full(ctx context.Context) (io.ReadCloser, error)
	// Identity is the datastore's, recorded beside each full.
	Identity(ctx context.Context) (Identity, error)
	// Revision is the datastore's current revision, read linearizably.
	Revision(ctx context.Context) (int64, error)
	// Watch streams every event of the keyspace from revision from on.
	Watch(ctx context.Context, from int64) clientv3.WatchChan
	// LeaseTTL is the granted TTL of lease id in seconds; LeaseGone when
	// the datastore holds it no more.
	LeaseTTL(ctx context.Context, id int64) (int64, error)
}

// SourceOptions configure NewSource. The zero value spools logical fulls
// through os.TempDir().
type SourceOptions struct {
	// SpoolDir holds a logical full while it is built: room for the
	// keyspace's database. Default os.TempDir().
	SpoolDir string
	// PageSize is how many keys the first Range of a logical full asks
	// for; the next ones aim at 16 MiB a page. Default 1,000.
	PageSize int64
	// Logger: nil discards.
	Logger *slog.Logger
}

// NewSource returns the source of kind that cli reaches.
func NewSource(kind SourceKind, cli *clientv3.Client, o SourceOptions) Source {
	if kind == SourceEtcdAPI {
		if o.PageSize <= 0 {
			o.PageSize = 1000
		}
		return &apiSource{cli: cli, o: o}
	}
	return etcdSource{cli: cli}
}

// EtcdSource is the etcd cluster cli reaches.
func EtcdSource(cli *clientv3.Client) Source { return etcdSource{cli: cli} }

type etcdSource struct{ cli *clientv3.Client }

func (etcdSource) Kind() SourceKind { return SourceEtcd }

func (s etcdSource) Full(ctx context.Context) (io.ReadCloser, error) {
	return dbstream.Open(ctx, s.cli)
}

func (s etcdSource) Identity(ctx context.Context) (Identity, error) { return IdentityOf(ctx, s.cli) }

func (s etcdSource) Revision(ctx context.Context) (int64, error) { return currentRevision(ctx, s.cli) }

func (s etcdSource) Watch(ctx context.Context, from int64) clientv3.WatchChan {
	// RequireLeader ends the watch when the member loses its leader,
	// instead of leaving a partitioned member's watch silent.
	return s.cli.Watch(clientv3.WithRequireLeader(ctx), "", clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
}

func (s etcdSource) LeaseTTL(ctx context.Context, id int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return 0, err
	}
	if resp.TTL < 0 {
		return LeaseGone, nil
	}
	return max(resp.GrantedTTL, 0), nil
}

// currentRevision reads the revision linearizably, without a key.
func currentRevision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("current revision: %w", err)
	}
	return resp.Header.Revision, nil
}
