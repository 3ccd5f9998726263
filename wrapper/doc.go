// Package wrapper runs one etcd member the way etcdkit's reference wrapper
// does: it loads etcd's configuration file strictly (LoadConfig), decides
// how the member starts from its data dir's verdict and the live cluster
// (validate, member), restores or rejoins when it must (restore, member,
// or the sidecar's API), starts etcd embedded, serves health endpoints,
// and on stop leaves a clean-shutdown marker and the volume guard. It
// reaches its own member and the others as etcd's configuration says
// (ClientConn: client-transport-security's CA bundle and client
// certificate), so a member with TLS clients and peers needs nothing more.
//
// It does not take snapshots or defragment (package sidecar does), and it
// holds no logic of validation, restore or membership of its own.
package wrapper
