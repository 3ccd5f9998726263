// Package kubernetes holds the reference Kubernetes manifests (etcd.yaml)
// and the test that checks them against the binaries and the wrapper's
// configuration loader; it has no code of its own.
package kubernetes
