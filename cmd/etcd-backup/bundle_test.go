package main

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fage "filippo.io/age"

	"github.com/etcdkit/etcdkit/etcdtest"
	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/snapshot"
	"github.com/etcdkit/etcdkit/store"
)

// A Kubernetes control plane with its Secrets encrypted at rest is lost
// whole, its etcd and the node that held the encryption key: serve's
// restore bundle (--bundle, sealed to --encrypt-to) brings the key back
// with the data, and a new kube-apiserver over the restored etcd reads
// the Secret again.
func TestBundleRestoresEncryptedSecrets(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	etcd := etcdtest.Start(t, etcdtest.Options{TLS: true, UnsafeNoFsync: true})
	sec := etcd.Security
	node := filepath.Join(dir, "node") // the control-plane node's files
	encryption := func(root string) string {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, "etc", "kubernetes", "enc", "encryption.yaml")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		cfg := `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc:
      keys:
      - name: key1
        secret: ` + base64.StdEncoding.EncodeToString(key) + `
  - identity: {}
`
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	encFile := encryption(node)
	kube := func(endpoints []string, sec *etcdtest.Security, encFile string) *emulator.Server {
		return emulator.RequireKube(t, emulator.KubeOptions{Etcd: endpoints, EtcdCA: sec.CA.File, EtcdCert: sec.Client.CertFile, EtcdKey: sec.Client.KeyFile,
			Args: []string{"--encryption-provider-config=" + encFile}})
	}
	api := kube(etcd.Endpoints(), sec, encFile)
	if out, err := api.Kube.Kubectl(ctx, nil, "create", "secret", "generic", "db", "--namespace=default", "--from-literal=password=hunter2"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	raw, err := etcd.Client(t).Get(ctx, "/registry/secrets/default/db")
	if err != nil || len(raw.Kvs) != 1 || !strings.HasPrefix(string(raw.Kvs[0].Value), "k8s:enc:aescbc:v1:key1:") {
		t.Fatalf("the Secret in etcd is not encrypted at rest: %v %v", raw, err)
	}

	id, err := fage.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(dir, "age.key")
	if err := os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "file://" + filepath.Join(dir, "store")
	conn := append([]string{"--endpoints", etcd.Endpoints()[0]}, connFlags(sec, "")...)
	p := startServe(t, conn, storeURL, "--encrypt-to", id.Recipient().String(), "--bundle", filepath.Dir(encFile))
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	etcdtest.Eventually(t, "a restore bundle beside the first full", time.Minute, func() bool {
		b, err := snapshot.ListBundles(ctx, st)
		return err == nil && len(b) == 1
	})
	// A second full with the files unchanged writes no bundle.
	etcdtest.Eventually(t, "a second full", 30*time.Second, func() bool { return apiCall(t, p, "POST", "/v1/snapshots/full", "").code == 200 })
	if b, _ := snapshot.ListBundles(ctx, st); len(b) != 1 {
		t.Fatalf("%d bundles after a full with the files unchanged", len(b))
	}
	if strings.Contains(p.logs.String(), "aescbc") {
		t.Fatal("serve logged the bundle's contents")
	}
	if err := p.term(t); err != nil {
		t.Fatal(err)
	}

	// The control plane is lost: its API server, its etcd's data and the
	// node's files.
	api.Stop()
	if err := os.RemoveAll(node); err != nil {
		t.Fatal(err)
	}
	peer, _, err := etcdtest.FreeURLs()
	if err != nil {
		t.Fatal(err)
	}
	peer.Scheme = "https"
	dataDir, bundleDir := filepath.Join(dir, "restored"), filepath.Join(dir, "bundle")
	out := ok(t, nil, "restore", "--store", storeURL, "--identity-file", idFile, "--data-dir", dataDir, "--name", "r0", "--peer-urls", peer.String(),
		"--bundle", bundleDir)
	t.Logf("restore --bundle:\n%s", out)
	if !strings.Contains(out, "bundle") || !strings.Contains(out, "put them in place") {
		t.Fatalf("restore does not say where the bundle went:\n%s", out)
	}
	restored := filepath.Join(bundleDir, strings.TrimPrefix(encFile, "/"))
	if _, err := os.Stat(restored); err != nil {
		t.Fatal(err)
	}
	etcd2 := etcdtest.StartDataDir(t, etcdtest.Options{UnsafeNoFsync: true, TLS: true}, "r0", dataDir, peer)
	api2 := kube(etcd2.Endpoints(), etcd2.Security, restored)
	got, err := api2.Kube.Kubectl(ctx, nil, "get", "secret", "db", "--namespace=default", "-o", "jsonpath={.data.password}")
	if err != nil || string(got) != base64.StdEncoding.EncodeToString([]byte("hunter2")) {
		t.Fatalf("the Secret after the restore, with the bundle's key: %q, %v", got, err)
	}
	t.Logf("the Secret read again with the bundle's key: %s", got)
	api2.Stop()
	// The restored etcd holds the Secret as it was, sealed with the key
	// the bundle brought back: without it the Secret went with the node
	// (a kube-apiserver with another key cannot list Secrets, and never
	// becomes ready).
	raw, err = etcd2.Client(t).Get(ctx, "/registry/secrets/default/db")
	if err != nil || len(raw.Kvs) != 1 || !strings.HasPrefix(string(raw.Kvs[0].Value), "k8s:enc:aescbc:v1:key1:") {
		t.Fatalf("the restored Secret: %v %v", raw, err)
	}
	// The bundle's directory must be empty: nothing is overwritten.
	r := etcdBackup(t, nil, "restore", "--store", storeURL, "--identity-file", idFile, "--data-dir", filepath.Join(dir, "again"), "--bundle", bundleDir)
	if r.code != 2 || !strings.Contains(r.stderr, "holds files") {
		t.Fatalf("restore --bundle into a full directory: exit %d\n%s", r.code, r.stderr)
	}
}
