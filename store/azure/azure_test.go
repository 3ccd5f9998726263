package azure_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/azure"
	"github.com/etcdkit/etcdkit/store/storetest"
)

var testOptions = store.Options{PartSize: 5 << 20, Concurrency: 3}

func createContainer(t *testing.T, srv *emulator.Server, name string) {
	t.Helper()
	cred, err := container.NewSharedKeyCredential(srv.Account, srv.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/"+name, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
}

// Put Block requests carry comp=block; Put Block List (comp=blocklist)
// commits them.
func isPartUpload(r *http.Request) bool {
	return r.Method == http.MethodPut && r.URL.Query().Get("comp") == "block"
}

func TestConformance(t *testing.T) {
	srv := emulator.Shared(t, emulator.Azure)
	createContainer(t, srv, "conformance")
	wire := &storetest.Wire{IsPartUpload: isPartUpload}
	opts := testOptions
	opts.Transport = wire
	cfg := func(name, prefix string) azure.Config {
		return azure.Config{Container: name, Prefix: prefix, Account: srv.Account, AccountKey: srv.Key, Endpoint: srv.Endpoint, Options: opts}
	}
	storetest.Run(t, storetest.Harness{
		Options: opts,
		Wire:    wire,
		Open: func(t *testing.T, prefix string) store.Store {
			st, err := azure.New(context.Background(), cfg("conformance", prefix))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		BadCredentials: func(t *testing.T) (store.Store, error) {
			c := cfg("conformance", "bad")
			c.AccountKey = "bm90LXRoZS1rZXk=" // valid base64, wrong key
			return store.Opened(azure.New(context.Background(), c))
		},
		MissingBucket: func(t *testing.T) (store.Store, error) {
			return store.Opened(azure.New(context.Background(), cfg("no-such-container", "")))
		},
	})
}

// TestCredentialSources opens stores from URLs, with the credentials where
// deployments keep them.
func TestCredentialSources(t *testing.T) {
	srv := emulator.Shared(t, emulator.Azure)
	createContainer(t, srv, "creds")
	ctx := context.Background()
	unset := func(t *testing.T) {
		for _, v := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_APPLICATION_CREDENTIALS_JSON",
			"AZURE_APPLICATION_CREDENTIALS", "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_API_ENDPOINT"} {
			t.Setenv(v, "")
		}
	}
	t.Run("connection-string", func(t *testing.T) {
		unset(t)
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", fmt.Sprintf(
			"DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;", srv.Account, srv.Key, srv.Endpoint))
		storetest.UseURL(t, "azblob://creds/cs")
	})
	t.Run("json", func(t *testing.T) {
		unset(t)
		p := filepath.Join(t.TempDir(), "azure.json")
		body := fmt.Sprintf(`{"storageAccount":%q,"storageKey":%q,"emulatorEnabled":true,"bucketName":"creds"}`, srv.Account, srv.Key)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AZURE_APPLICATION_CREDENTIALS_JSON", p)
		t.Setenv("AZURE_STORAGE_API_ENDPOINT", strings.TrimSuffix(srv.Endpoint, "/"+srv.Account))
		storetest.UseURL(t, "azblob://creds/json")
	})
	t.Run("directory", func(t *testing.T) {
		unset(t)
		dir := t.TempDir()
		for name, v := range map[string]string{"storageAccount": srv.Account, "storageKey": srv.Key + "\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("AZURE_APPLICATION_CREDENTIALS", dir)
		storetest.UseURL(t, "azblob://creds/dir?endpoint="+srv.Endpoint)
	})
	t.Run("shared-key-environment", func(t *testing.T) {
		unset(t)
		t.Setenv("AZURE_STORAGE_KEY", srv.Key)
		storetest.UseURL(t, "azblob://creds/env?account="+srv.Account+"&endpoint="+srv.Endpoint)
	})
	t.Run("absent-paths", func(t *testing.T) {
		// etcd-druid sets the variables where no secret is mounted: the
		// other sources answer (here the key in the environment).
		unset(t)
		t.Setenv("AZURE_APPLICATION_CREDENTIALS_JSON", filepath.Join(t.TempDir(), "absent.json"))
		t.Setenv("AZURE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "absent"))
		t.Setenv("AZURE_STORAGE_KEY", srv.Key)
		storetest.UseURL(t, "azblob://creds/absent?account="+srv.Account+"&endpoint="+srv.Endpoint)
	})
	t.Run("rotation", func(t *testing.T) {
		// The key in the credential file changes under an open store: the
		// next call signs with the new one (a wrong one is refused, the
		// right one again accepted), without a new store. Azurite's keys
		// are fixed, so a wrong key stands in for a retired one.
		unset(t)
		p := filepath.Join(t.TempDir(), "azure.json")
		write := func(key string) {
			tmp := p + ".tmp"
			body := fmt.Sprintf(`{"storageAccount":%q,"storageKey":%q}`, srv.Account, key)
			if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			// A new file, as a secret volume's swap makes one.
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
		}
		write(srv.Key)
		t.Setenv("AZURE_APPLICATION_CREDENTIALS_JSON", p)
		st, err := store.Open(ctx, "azblob://creds/rotation?endpoint="+srv.Endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, "one", strings.NewReader("1")); err != nil {
			t.Fatal(err)
		}
		write("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
		if _, err := st.List(ctx, ""); !errors.Is(err, store.ErrAccessDenied) {
			t.Fatalf("a list with a wrong key rotated in: %v, want access denied", err)
		}
		write(srv.Key)
		if err := st.Put(ctx, "two", strings.NewReader("2")); err != nil {
			t.Fatalf("a put with the right key rotated back: %v", err)
		}
	})
	t.Run("no-account", func(t *testing.T) {
		unset(t)
		_, err := store.Open(ctx, "azblob://creds/x")
		if err == nil || !strings.Contains(err.Error(), "account") {
			t.Fatalf("open without an account: %v", err)
		}
	})
	t.Run("bad-connection-string", func(t *testing.T) {
		unset(t)
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "garbage")
		if _, err := store.Open(ctx, "azblob://creds/x"); !errors.Is(err, store.ErrAccessDenied) {
			t.Fatalf("open with a bad connection string: %v", err)
		}
	})
}

// A blob whose index tag says x-etcd-snapshot-exclude=true is not listed,
// as etcd-backup-restore reads an Azure container.
func TestExcludeTag(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := emulator.Shared(t, emulator.Azure)
	createContainer(t, srv, "exclude")
	st, err := azure.New(ctx, azure.Config{Container: "exclude", Prefix: "etcd", Account: srv.Account, AccountKey: srv.Key, Endpoint: srv.Endpoint, Options: testOptions})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"v2/Full-00000000-00000010-1700000000", "v2/Full-00000000-00000020-1700000100"} {
		if err := st.Put(ctx, key, strings.NewReader("full")); err != nil {
			t.Fatal(err)
		}
	}
	cred, err := container.NewSharedKeyCredential(srv.Account, srv.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/exclude", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewBlobClient("etcd/v2/Full-00000000-00000020-1700000100").SetTags(ctx, map[string]string{store.ExcludeTag: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "v2/")
	if err != nil || len(objs) != 1 || objs[0].Key != "v2/Full-00000000-00000010-1700000000" {
		t.Fatalf("listed %+v, %v; want the untagged full alone", objs, err)
	}
	// What the listing leaves out can be told, through a view too.
	view, err := store.WithPrefix(st, "v2")
	if err != nil {
		t.Fatal(err)
	}
	out, err := store.ListExcluded(ctx, view, "Full-")
	if err != nil || len(out) != 1 || out[0].Key != "Full-00000000-00000020-1700000100" || out[0].Size != 4 {
		t.Fatalf("excluded %+v, %v; want the tagged full", out, err)
	}
}
