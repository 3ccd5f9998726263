// Package credfile reads the credential files of etcd-backup-restore, so
// that a deployment's existing secrets work unchanged: an environment
// variable names either a JSON file of fields, or a directory holding one
// file per field (a mounted Kubernetes secret), or a directory holding such
// a JSON file.
//
// It owns the file formats only; which fields mean what, and which variable
// names them, belongs to each backend.
package credfile
