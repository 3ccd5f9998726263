// Package withetcd holds validate's tests over what real etcd writes: data
// dirs of embedded and killed members, and WALs, snap files and databases
// from etcd's own writers, compared with validate's decoders. It is a
// module of its own so that etcd's server, which the tests need, stays out
// of validate's module, which an embedder's graph takes.
package withetcd
