// Package storetest is the one conformance suite that every store backend
// runs: round trips of empty, small and large objects (the large one through
// the backend's multipart path, asserted on the wire), overwrite, listing
// past one page, prefixes, missing objects, concurrent puts, failed and
// cancelled puts that must leave nothing, bad credentials and missing
// buckets that must fail at once with a useful message, retries through a
// flaky wire, and bounded memory.
//
// A backend's test gives a Harness that opens stores of that backend; cloud
// backends open them against real emulators started by internal/emulator.
// The suite owns no backend code and no emulator.
package storetest
