// Package datadir holds what more than one package does to a member's
// data dir as a whole. Data dirs are never deleted: one that is replaced
// is moved aside, where an operator can still reach it.
package datadir
