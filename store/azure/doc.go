// Package azure is the store backend for Azure Blob Storage, registered for
// azblob:// URLs when imported:
//
//	azblob://container/prefix?account=myaccount
//	azblob://container/prefix?endpoint=http://127.0.0.1:10000/devstoreaccount1
//
// Small objects go up in one request; larger ones as blocks staged in
// parallel from a fixed set of PartSize buffers and committed as one block
// list at the end, so an object appears only when complete (blocks of a
// failed upload stay uncommitted and invisible until Azure discards them).
// The SDK's UploadBuffer and UploadFile are not used: they ignore small
// block sizes and need the whole object at hand. Downloads read parallel
// byte ranges of one ETag.
//
// Credentials, first found wins: a connection string
// (AZURE_STORAGE_CONNECTION_STRING), the etcd-backup-restore credential
// file or directory (AZURE_APPLICATION_CREDENTIALS_JSON,
// AZURE_APPLICATION_CREDENTIALS: storageAccount, storageKey, domain,
// emulatorEnabled), a shared key in AZURE_STORAGE_KEY, and Azure's default
// credential chain (environment, workload identity, managed identity, CLI;
// an AZURE_AUTHORITY_HOST of a private cloud is asked without Microsoft's
// instance discovery).
//
// It owns nothing but moving bytes to and from Azure.
package azure
