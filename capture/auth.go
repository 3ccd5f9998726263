package capture

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdkit/etcdkit/snapshot"
)

// authLog records the auth state with a delta whenever etcd's auth
// revision moved since the last one recorded: one AuthStatus per delta,
// and the users and roles only after a change.
type authLog struct {
	mu       sync.Mutex
	recorded bool
	revision uint64
	denied   bool // logged once: the backup user may not read users and roles
	// refusedAt is the auth revision at which reading the users and roles
	// was refused: asked again only once it moves (a grant of root moves it).
	refused   bool
	refusedAt uint64
	// moved: the users and roles changed since the first record, and no
	// full snapshot took their password hashes yet.
	moved bool
}

// changed returns the auth state when it changed since it was last
// recorded, nil otherwise.
func (a *authLog) changed(ctx context.Context, cli *clientv3.Client) (*snapshot.Auth, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("auth status: %w", err)
	}
	if a.recorded && st.AuthRevision == a.revision || a.refused && st.AuthRevision == a.refusedAt {
		return nil, nil
	}
	state, err := readAuth(ctx, cli)
	if err != nil {
		if isDenied(err) {
			a.refused, a.refusedAt = true, st.AuthRevision
		}
		return nil, err
	}
	state.Enabled, state.Revision = st.Enabled, st.AuthRevision
	a.moved = a.moved || a.recorded
	a.recorded, a.revision = true, st.AuthRevision
	return state, nil
}

// takeMoved says whether the users and roles changed since the last call:
// a full snapshot then takes what a delta cannot, the password hashes.
func (a *authLog) takeMoved() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	moved := a.moved
	a.moved = false
	return moved
}

// deniedOnce says whether err is the first refusal to read the users and
// roles: worth a warning once, not with every delta.
func (a *authLog) deniedOnce(err error) bool {
	if !isDenied(err) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	first := !a.denied
	a.denied = true
	return first
}

func isDenied(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrGRPCPermissionDenied)
}

func readAuth(ctx context.Context, cli *clientv3.Client) (*snapshot.Auth, error) {
	state := &snapshot.Auth{}
	users, err := cli.UserList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	for _, name := range users.Users {
		u, err := cli.UserGet(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("user %s: %w", name, err)
		}
		state.Users = append(state.Users, snapshot.AuthUser{Name: name, Roles: u.Roles})
	}
	roles, err := cli.RoleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list roles: %w", err)
	}
	for _, name := range roles.Roles {
		r, err := cli.RoleGet(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("role %s: %w", name, err)
		}
		role := snapshot.AuthRole{Name: name}
		for _, p := range r.Perm {
			role.Permissions = append(role.Permissions, snapshot.AuthPermission{Type: p.PermType.String(), Key: p.Key, RangeEnd: p.RangeEnd})
		}
		state.Roles = append(state.Roles, role)
	}
	slices.SortFunc(state.Users, func(a, b snapshot.AuthUser) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(state.Roles, func(a, b snapshot.AuthRole) int { return strings.Compare(a.Name, b.Name) })
	return state, nil
}
