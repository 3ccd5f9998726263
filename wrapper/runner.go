package wrapper

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"

	"github.com/etcdkit/etcdkit/etcdclient"
	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/restore"
)

// Runner runs the etcd a member runs. The start-up judges the data dir
// for its release, restores for it and joins only where it may join, and
// then starts it; nothing else of the start-up knows which Runner runs.
//   - Embedded (the default) runs this module's etcd (3.7) in the
//     wrapper's process, as library users embed it.
//   - Process runs an official etcd server binary of the operator's
//     release (3.5, 3.6 or 3.7) as the wrapper's child.
type Runner interface {
	// Release is the etcd release it runs.
	Release(ctx context.Context) (etcdversion.Version, error)
	// Start starts etcd with cfg, whose initial cluster and state the
	// start-up decided, and returns once the member serves its clients,
	// or fails (ctx ended: the start is abandoned and etcd stopped). conn
	// is how the member is reached (TLS, authentication).
	Start(ctx context.Context, cfg *embed.Config, conn etcdclient.Config) (Etcd, error)
}

// Etcd is a running member, as a Runner started it.
type Etcd interface {
	// ID is the member's ID.
	ID() uint64
	// Learner says whether the member is a learner, as it says itself.
	Learner(ctx context.Context) (bool, error)
	// Client reaches this member alone; Stop closes it.
	Client() *clientv3.Client
	// Done is closed once etcd stopped by itself (it failed, or the
	// cluster removed the member); Err then says why.
	Done() <-chan struct{}
	Err() error
	// Stop stops etcd gracefully and waits until it has.
	Stop() error
}

// Embedded runs this module's etcd in the wrapper's process.
type Embedded struct{}

// Release implements Runner: the release this module is built with.
func (Embedded) Release(context.Context) (etcdversion.Version, error) { return restore.Module, nil }

// Start implements Runner.
func (Embedded) Start(ctx context.Context, cfg *embed.Config, _ etcdclient.Config) (Etcd, error) {
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	m := &embedded{e: e, cli: v3client.New(e.Server), done: make(chan struct{})}
	go m.watch()
	return m, nil
}

// embedded is a member Embedded started.
type embedded struct {
	e    *embed.Etcd
	cli  *clientv3.Client
	done chan struct{}

	mu      sync.Mutex
	err     error
	stopped bool
}

// watch closes done when etcd stops without Stop: an error, or the
// server stopping (a removed member's does).
func (m *embedded) watch() {
	var err error
	select {
	case err = <-m.e.Err():
		err = fmt.Errorf("etcd failed: %w", err)
	case <-m.e.Server.StopNotify():
		err = errors.New("etcd stopped by itself (removed from the cluster?)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	m.err = err
	close(m.done)
}

// Etcd is the embedded server, for a library user that needs it.
func (m *embedded) Etcd() *embed.Etcd { return m.e }

func (m *embedded) ID() uint64                            { return uint64(m.e.Server.MemberID()) }
func (m *embedded) Learner(context.Context) (bool, error) { return m.e.Server.IsLearner(), nil }
func (m *embedded) Client() *clientv3.Client              { return m.cli }
func (m *embedded) Done() <-chan struct{}                 { return m.done }

func (m *embedded) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

func (m *embedded) Stop() error {
	m.mu.Lock()
	m.stopped = true
	m.mu.Unlock()
	_ = m.cli.Close()
	m.e.Close()
	return nil
}
