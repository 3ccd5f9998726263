// Package cli holds what the reference binaries share to turn a command
// line into options: every flag also read from an ETCDKIT_ environment
// variable or a YAML file (and, for the flags etcdctl shares, from its
// ETCDCTL_ variables), other tools' names for a flag, the log and codec
// flags, the usage errors that make them exit 2, the version and man page
// commands, and progress on a terminal. It holds no logic of etcdkit's
// own.
package cli
