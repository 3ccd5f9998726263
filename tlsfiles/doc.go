// Package tlsfiles turns PEM files on disk into TLS configurations for
// clients and servers that read the files again when they change, so a
// certificate, key or CA bundle rotated in place (cert-manager, a
// Kubernetes Secret volume) takes effect at the next handshake without a
// restart, while connections already made carry on.
//
// It checks what it can before the first connection (a key that is not
// its certificate's, an expired certificate, a CA file without a
// certificate), and Explain turns a failed handshake into an error that
// says which file or setting to fix.
//
// It owns TLS files only: which endpoints to dial, etcd's authentication
// and timeouts belong to package etcdclient, and the sidecar's API to
// package sidecar. It imports the standard library only, so a caller of
// the sidecar's API needs no etcd code.
package tlsfiles
