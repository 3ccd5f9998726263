// Package swift is the store backend for OpenStack Swift, registered for
// swift:// URLs when imported:
//
//	swift://container/prefix
//
// Objects up to PartSize go up in one request. Larger ones go up as
// segments stored beside them (key/0000000001, …, the names
// etcd-backup-restore gives its segments, so that each tool's listing
// skips the other's) and then a static large object manifest that names
// each segment with its ETag: the object appears only when the manifest
// is written, and the manifest is written only if no object is there
// (If-None-Match: *). Two writers of one key number their segments from
// different random starts, so neither overwrites a segment of the other's
// manifest. Segments double in size every 200, so the 1,000 segments a
// manifest may hold carry 6,200 × PartSize (48 GiB at 8 MiB). A listing
// shows each object once, with its whole size (a dynamic manifest of
// etcd-backup-restore's with its segments' sizes), and never a segment;
// Delete removes the manifest first and then every segment under it, so a
// half-done delete leaves segments no listing shows, never a truncated
// object. Downloads read parallel ranges of one ETag.
//
// Credentials, first found wins: the Config's, etcd-backup-restore's
// credential file or directory (OPENSTACK_APPLICATION_CREDENTIALS_JSON,
// OPENSTACK_APPLICATION_CREDENTIALS: authURL, domainName, tenantName,
// username and password, or applicationCredentialID,
// applicationCredentialName and applicationCredentialSecret; region), then
// the OS_* variables of OpenStack's clients. Keystone v3 authenticates
// them, and the object-store endpoint of the catalog in OS_REGION_NAME or
// the region given is used; an authURL ending in /auth/v1.0 is Swift's own
// authentication (tempauth, swauth) instead. Credential files changed on
// disk are used for the next operation without a restart.
//
// It owns nothing but moving bytes to and from Swift.
package swift
