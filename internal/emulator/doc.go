// Package emulator starts the servers the tests and the benchmarks run
// against as child processes on free loopback ports, and stops them: the
// store emulators — versitygw for S3, fake-gcs-server for GCS, Azurite
// for Azure Blob Storage (over HTTPS with OAuth when asked), OpenStack
// Swift from Debian's packages with tempauth —, kube-apiserver, over an etcd the test
// gives, with certificates, an administrator's token and RBAC of its own,
// etcd servers of older versions (3.5, 3.6), one member each, and kine
// (k3s' etcd API) over SQLite, with TLS when asked.
//
// It owns finding the installed programs (tools/install-emulators.sh puts
// them in tools/), the policy for a missing one (a test fails when
// ETCDKIT_REQUIRE_EMULATORS=1, as the project's test command sets, and skips
// with the command to run otherwise), and waiting until a server answers.
//
// It does not create buckets (but for s3lock, a module of its own that
// creates buckets with Object Lock through the AWS SDK), talk the store protocols or make Kubernetes
// objects: tests do that with the real SDKs, client-go and kubectl (but for
// a Swift container, which its readiness probe makes over HTTP anyway).
package emulator
