// Package gcs is the store backend for Google Cloud Storage, registered for
// gs:// URLs when imported:
//
//	gs://bucket/prefix
//	gs://bucket/prefix?endpoint=http://127.0.0.1:4443   (an emulator)
//
// Uploads are resumable uploads of PartSize chunks, retried chunk by chunk
// and cancelled with their context, so an object appears only when
// complete; downloads read parallel byte ranges of one object generation.
// Credentials are Google's application default credentials, including
// GOOGLE_APPLICATION_CREDENTIALS as etcd-backup-restore deployments set it
// (a service-account or external_account file, or a directory holding
// serviceaccount.json, with an optional storageAPIEndpoint file beside it).
// A variable naming an absent path is kept from the SDK, and the other
// default credentials answer.
//
// It owns nothing but moving bytes to and from GCS.
package gcs
