package capture

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/etcdkit/etcdkit/snapshot"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/internal/dbstream"
)

// Source is what a backup needs from its datastore. Chains, codecs,
// retention, the catalog and restore are the same whatever the source:
// every full is an etcd database and every delta the Watch API's events.
type Datastore interface {
	// Kind says which source it is.
	Kind() snapshot.SourceKind
	// Full streams an etcd database of the whole keyspace at one revision,
	// followed by its SHA-256, as etcd's Maintenance.Snapshot does. Closing
	// it ends the stream and releases what it holds.
	Full(ctx context.Context) (io.ReadCloser, error)
	// Identity is the datastore's, recorded beside each full.
	Identity(ctx context.Context) (snapshot.Identity, error)
	// Revision is the datastore's current revision, read linearizably.
	Revision(ctx context.Context) (int64, error)
	// Watch streams every event of the keyspace from revision from on.
	Watch(ctx context.Context, from int64) clientv3.WatchChan
	// LeaseTTL is the granted TTL of lease id in seconds; snapshot.LeaseGone when
	// the datastore holds it no more.
	LeaseTTL(ctx context.Context, id int64) (int64, error)
}

// DatastoreOptions configure NewDatastore. The zero value spools logical fulls
// through os.TempDir().
type DatastoreOptions struct {
	// SpoolDir holds a logical full while it is built: room for the
	// keyspace's database. Default os.TempDir().
	SpoolDir string
	// PageSize is how many keys the first Range of a logical full asks
	// for; the next ones aim at 16 MiB a page. Default 1,000.
	PageSize int64
	// Logger: nil discards.
	Logger *slog.Logger
}

// NewDatastore returns the source of kind that cli reaches.
func NewDatastore(kind snapshot.SourceKind, cli *clientv3.Client, o DatastoreOptions) Datastore {
	if kind == snapshot.SourceEtcdAPI {
		if o.PageSize <= 0 {
			o.PageSize = 1000
		}
		return &apiDatastore{cli: cli, o: o}
	}
	return etcdDatastore{cli: cli}
}

// EtcdDatastore is the etcd cluster cli reaches.
func EtcdDatastore(cli *clientv3.Client) Datastore { return etcdDatastore{cli: cli} }

type etcdDatastore struct{ cli *clientv3.Client }

func (etcdDatastore) Kind() snapshot.SourceKind { return snapshot.SourceEtcd }

func (s etcdDatastore) Full(ctx context.Context) (io.ReadCloser, error) {
	return dbstream.Open(ctx, s.cli)
}

func (s etcdDatastore) Identity(ctx context.Context) (snapshot.Identity, error) {
	return IdentityOf(ctx, s.cli)
}

func (s etcdDatastore) Revision(ctx context.Context) (int64, error) {
	return currentRevision(ctx, s.cli)
}

func (s etcdDatastore) Watch(ctx context.Context, from int64) clientv3.WatchChan {
	// RequireLeader ends the watch when the member loses its leader,
	// instead of leaving a partitioned member's watch silent.
	return s.cli.Watch(clientv3.WithRequireLeader(ctx), "", clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
}

func (s etcdDatastore) LeaseTTL(ctx context.Context, id int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return 0, err
	}
	if resp.TTL < 0 {
		return snapshot.LeaseGone, nil
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

// IdentityOf asks the cluster cli reaches for its identity.
func IdentityOf(ctx context.Context, cli *clientv3.Client) (snapshot.Identity, error) {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return snapshot.Identity{}, fmt.Errorf("cluster identity: %w", err)
	}
	id := snapshot.Identity{ClusterID: hexID(list.Header.ClusterId), Created: time.Now().UTC()}
	for _, m := range list.Members {
		id.MemberIDs = append(id.MemberIDs, hexID(m.ID))
	}
	slices.Sort(id.MemberIDs)
	for _, ep := range cli.Endpoints() {
		if st, err := cli.Status(ctx, ep); err == nil {
			id.EtcdVersion = st.Version
			break
		}
	}
	return id, nil
}

func hexID(id uint64) string { return strconv.FormatUint(id, 16) }

// castagnoli is the table of the CRC-32C that tails record of values.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
