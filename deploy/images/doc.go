// Package images checks the container images of etcd-wrapper and
// etcd-backup that tools/image.sh builds: it runs the script and reads the
// OCI layout it writes with the standard library alone (an independent
// reader of what go-containerregistry wrote), then runs the binary taken
// out of each image. It has no code of its own.
package images
