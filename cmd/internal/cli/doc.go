// Package cli holds what the reference binaries share to turn a command
// line into options: every flag also read from an ETCDKIT_ environment
// variable or a YAML file, the log and codec flags, the usage errors that
// make them exit 2, and progress on a terminal. It holds no logic of
// etcdkit's own.
package cli
