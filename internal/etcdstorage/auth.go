package etcdstorage

import (
	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/server/v3/storage/schema"
	"go.uber.org/zap"
)

// ApplyAuth writes users and roles as of auth revision revision, when it
// is newer than the database's: the roles and users as given, the users
// keeping the password hashes the database holds for them, none for users
// it does not hold (etcd never tells a password). It returns whether it
// wrote, and the users that have no password now. The batch lock must not
// be held.
func (b *Backend) ApplyAuth(enabled bool, revision uint64, roles []*authpb.Role, users []*authpb.User) (bool, []string) {
	be := schema.NewAuthBackend(zap.NewNop(), b.be)
	be.CreateAuthBuckets()
	tx := be.BatchTx()
	tx.Lock()
	defer tx.Unlock()
	if revision <= tx.UnsafeReadAuthRevision() {
		return false, nil
	}
	named := map[string]bool{}
	for _, role := range roles {
		tx.UnsafePutRole(role)
		named[string(role.Name)] = true
	}
	for _, old := range tx.UnsafeGetAllRoles() {
		if !named[string(old.Name)] {
			tx.UnsafeDeleteRole(string(old.Name))
		}
	}
	held := map[string]*authpb.User{}
	for _, u := range tx.UnsafeGetAllUsers() {
		held[string(u.Name)] = u
	}
	var noPassword []string
	for _, user := range users {
		if old := held[string(user.Name)]; old != nil {
			user.Password, user.Options = old.Password, old.Options
			delete(held, string(user.Name))
		}
		if len(user.Password) == 0 && (user.Options == nil || !user.Options.NoPassword) {
			noPassword = append(noPassword, string(user.Name))
		}
		tx.UnsafePutUser(user)
	}
	for name := range held {
		tx.UnsafeDeleteUser(name)
	}
	tx.UnsafeSaveAuthEnabled(enabled)
	tx.UnsafeSaveAuthRevision(revision)
	return true, noPassword
}
