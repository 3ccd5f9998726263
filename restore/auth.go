package restore

import (
	"fmt"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"

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
	be := schema.NewAuthBackend(zap.NewNop(), r.b)
	be.CreateAuthBuckets()
	tx := be.BatchTx()
	tx.Lock()
	defer tx.Unlock()
	if a.Revision <= tx.UnsafeReadAuthRevision() {
		return false, nil, nil
	}
	roles := map[string]bool{}
	for _, role := range a.Roles {
		p, err := roleProto(role)
		if err != nil {
			return false, nil, err
		}
		tx.UnsafePutRole(p)
		roles[role.Name] = true
	}
	for _, old := range tx.UnsafeGetAllRoles() {
		if !roles[string(old.Name)] {
			tx.UnsafeDeleteRole(string(old.Name))
		}
	}
	held := map[string]*authpb.User{}
	for _, u := range tx.UnsafeGetAllUsers() {
		held[string(u.Name)] = u
	}
	var noPassword []string
	for _, u := range a.Users {
		user := &authpb.User{Name: []byte(u.Name), Roles: u.Roles}
		if old := held[u.Name]; old != nil {
			user.Password, user.Options = old.Password, old.Options
			delete(held, u.Name)
		}
		if len(user.Password) == 0 && (user.Options == nil || !user.Options.NoPassword) {
			noPassword = append(noPassword, u.Name)
		}
		tx.UnsafePutUser(user)
	}
	for name := range held {
		tx.UnsafeDeleteUser(name)
	}
	tx.UnsafeSaveAuthEnabled(a.Enabled)
	tx.UnsafeSaveAuthRevision(a.Revision)
	return true, noPassword, nil
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
