// Package freeport picks loopback TCP ports for the servers tests start:
// embedded etcd members, the binaries under test and the store emulators.
// A port it returns was free a moment ago, is never returned twice in one
// process, and lies below the kernel's ephemeral range, so no outgoing
// connection takes it between the pick and the server's bind.
//
// Test binaries run side by side (go test runs packages in parallel, and
// tools/test.sh runs its two tiers at once): each process takes one of a
// few slots of the range under a lock held for its life, so two processes
// never pick the same port. Without the lock (not Linux, every slot
// taken) a process picks from the whole range, as one process alone may.
//
// It does not reserve a port: a server started on one must still expect
// "address already in use" from a port the rest of the machine took.
package freeport
