// Package chaintest checks, for tests, what every backup test must end
// with: the store's latest chain has no gap and restores to exactly what
// the live cluster held at its revision; and HeldFulls, a store whose full
// snapshot upload a test holds; Running, a Snapshotter under test with
// its results recorded, and the keyspace replays a test compares.
package chaintest
