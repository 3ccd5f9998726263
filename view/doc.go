// Package view shows what a store holds the way list, fleet and the
// sidecar's API show it: a snapshot, a chain and the timelines in
// sidecar/api's wire types, and a chain with the cluster it was taken of,
// what keeps it from being restored whole and how long a restore of it
// takes. One view, so the three never tell a chain differently.
//
// It reads the names a listing gives and the identity record beside a
// chain's full; it reads no snapshot's contents (list --check does, through
// restore) and decides nothing about them.
package view
