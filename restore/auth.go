package restore

import (
	"fmt"

	"go.etcd.io/etcd/api/v3/authpb"

	"github.com/etcdkit/etcdkit/snapshot"
)

// applyAuth writes the users and roles the deltas recorded last, when
// they are newer than the database's: users and roles as they were, the
// password hashes of the users the full snapshot holds, none for users
// made since (etcd never tells a password). It returns whether it wrote,
// and the users that have no password now.
func (r *replayer) applyAuth() (bool, []string, error) {
	a := r.auth
	if a == nil {
		return false, nil, nil
	}
	roles := make([]*authpb.Role, 0, len(a.Roles))
	for _, role := range a.Roles {
		p, err := roleProto(role)
		if err != nil {
			return false, nil, err
		}
		roles = append(roles, p)
	}
	users := make([]*authpb.User, 0, len(a.Users))
	for _, u := range a.Users {
		users = append(users, &authpb.User{Name: []byte(u.Name), Roles: u.Roles})
	}
	r.release()
	wrote, noPassword := r.b.ApplyAuth(a.Enabled, a.Revision, roles, users)
	return wrote, noPassword, nil
}

// noteAuth keeps the newest users and roles an event carries.
func (r *replayer) noteAuth(ev snapshot.Event) {
	if ev.Auth != nil && (r.auth == nil || ev.Auth.Revision >= r.auth.Revision) {
		r.auth = ev.Auth
	}
}

// roleProto is the role as etcd stores it.
func roleProto(r snapshot.AuthRole) (*authpb.Role, error) {
	role := &authpb.Role{Name: []byte(r.Name)}
	for _, p := range r.Permissions {
		t, ok := authpb.Permission_Type_value[p.Type]
		if !ok {
			return nil, fmt.Errorf("role %s: permission type %q", r.Name, p.Type)
		}
		role.KeyPermission = append(role.KeyPermission, &authpb.Permission{PermType: authpb.Permission_Type(t), Key: p.Key, RangeEnd: p.RangeEnd})
	}
	return role, nil
}
