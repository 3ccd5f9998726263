// Package withbolt tests package database against what bbolt itself reads
// and writes. It is a module of its own so that bbolt and etcd's protobuf
// types stay out of the graph of the leaves that use package database.
package withbolt
