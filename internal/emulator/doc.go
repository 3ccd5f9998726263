// Package emulator starts the store emulators that the tests and the
// benchmarks run the cloud backends against — versitygw for S3,
// fake-gcs-server for GCS, Azurite for Azure Blob Storage — as child
// processes on free loopback ports, and stops them.
//
// It owns finding the installed emulators (tools/install-emulators.sh puts
// them in tools/), the policy for a missing one (a test fails when
// ETCDKIT_REQUIRE_EMULATORS=1, as the project's test command sets, and skips
// with the command to run otherwise), and waiting until a server answers.
//
// It does not create buckets or talk the store protocols: tests do that
// with the real SDKs.
package emulator
