// Command tls is one member the way production runs it: etcd serves
// clients and peers over TLS and requires client certificates, its
// authentication is on, and the sidecar's API is HTTPS that takes client
// certificates. The wrapper needs nothing but etcd's configuration; the
// sidecar logs in as a user with the root role. Certificates come from a
// CA made for the run.
//
//	go run ./examples/tls
package main
