// Sidecar-owns-init shows the division etcd-druid's stack uses today: the
// wrapper knows no store; before etcd starts it asks the sidecar's API to
// validate the data dir and restore it if needed, and waits. Choose it
// when the store's credentials must stay in one container.
//
// The two containers would run:
//
//	etcd-backup serve --store s3://bucket/etcd --restore-root /var/lib/etcd --token-file …
//	etcd-wrapper --config etcd.yaml --init sidecar --sidecar-url http://localhost:8080 --sidecar-token-file …
//
// This program runs both parts in one process, configured exactly so,
// talking over HTTP, and puts them through a damaged database.
package main
