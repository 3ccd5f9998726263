// Package tenant writes a past state into a live cluster: ApplyState (a
// prefix's keys as the backups hold them, each write guarded on the key's
// mod revision as read, so nothing written meanwhile is overwritten
// unseen), Undelete (the keys of a past state written back where they are
// absent, never over a key written since) and Move (a prefix loaded into
// another cluster from the backups, then each new delta's events applied
// as they land, until the cut-over).
//
// The past states come from package history. It does not build data dirs
// (a tenant's keys in a cluster of their own are restore.Options.Prefix)
// and does not read a live cluster's own backups beyond the store.
package tenant
