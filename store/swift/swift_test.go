package swift_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/objects"
	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/swauth"
	"github.com/gophercloud/gophercloud/v2/pagination"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/storetest"
	"github.com/etcdkit/etcdkit/store/swift"
)

var testOptions = store.Options{PartSize: 1 << 20, Concurrency: 3}

// segmentName is how both etcdkit and etcd-backup-restore name segments.
var segmentName = regexp.MustCompile(`/[0-9]{10}$`)

// client is a plain SDK client of the emulator's account, for what the
// tests arrange and inspect beside the store.
func client(t *testing.T, srv *emulator.Server) *gophercloud.ServiceClient {
	t.Helper()
	pc, err := openstack.NewClient(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := swauth.NewObjectStorageV1(context.Background(), pc, swauth.AuthOpts{User: srv.AccessKey, Key: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// container creates a container no other test uses.
func container(t *testing.T, srv *emulator.Server) string {
	t.Helper()
	name := emulator.Bucket(t)
	if err := srv.CreateSwiftContainer(name); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	return name
}

func names(t *testing.T, sc *gophercloud.ServiceClient, container, prefix string) []string {
	t.Helper()
	var all []string
	err := objects.List(sc, container, objects.ListOpts{Prefix: prefix}).EachPage(context.Background(), func(_ context.Context, p pagination.Page) (bool, error) {
		n, err := objects.ExtractNames(p)
		all = append(all, n...)
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func tempauth(srv *emulator.Server) swift.Credentials {
	return swift.Credentials{AuthURL: srv.Endpoint, Username: srv.AccessKey, Password: srv.SecretKey}
}

// Segment uploads are PUTs of names ending in ten digits.
func isPartUpload(r *http.Request) bool {
	return r.Method == http.MethodPut && segmentName.MatchString(r.URL.Path)
}

func TestConformance(t *testing.T) {
	srv := emulator.Shared(t, emulator.Swift)
	name := container(t, srv)
	wire := &storetest.Wire{IsPartUpload: isPartUpload}
	opts := testOptions
	opts.Transport = wire
	cfg := func(container, prefix string) swift.Config {
		return swift.Config{Container: container, Prefix: prefix, Credentials: tempauth(srv), Options: opts}
	}
	storetest.Run(t, storetest.Harness{
		Options:   opts,
		Wire:      wire,
		LargeSize: 24<<20 + 123,
		RacingWritersBothWin: "Swift checks If-None-Match against the object stored when a request arrives, " +
			"so two creates in flight at once may both be taken (the store then tells the earlier one it lost, when it looks in time)",
		Open: func(t *testing.T, prefix string) store.Store {
			st, err := swift.New(context.Background(), cfg(name, prefix))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		BadCredentials: func(t *testing.T) (store.Store, error) {
			c := cfg(name, "bad")
			c.Credentials.Password = "not-the-key"
			return store.Opened(swift.New(context.Background(), c))
		},
		MissingBucket: func(t *testing.T) (store.Store, error) {
			return store.Opened(swift.New(context.Background(), cfg("no-such-container", "")))
		},
	})
}

// TestLargeObjects: a large object's segments sit where etcd-backup-restore
// looks for them, no listing shows them, a delete takes them along, and a
// segment name is no key.
func TestLargeObjects(t *testing.T) {
	srv := emulator.Shared(t, emulator.Swift)
	name := container(t, srv)
	sc := client(t, srv)
	ctx := context.Background()
	st, err := swift.New(ctx, swift.Config{Container: name, Prefix: "etcd-main/v2", Credentials: tempauth(srv), Options: testOptions})
	if err != nil {
		t.Fatal(err)
	}
	key := "Full-00000000-00000123-1700000000.gz"
	data := bytes.Repeat([]byte("0123456789abcdef"), (3<<20)/16+7)
	if err := st.Put(ctx, key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	raw := names(t, sc, name, "")
	var segs int
	for _, n := range raw {
		switch {
		case n == "etcd-main/v2/"+key:
		case strings.HasPrefix(n, "etcd-main/v2/"+key+"/") && segmentName.MatchString(n):
			segs++
		default:
			t.Fatalf("unexpected object %s in %v", n, raw)
		}
	}
	if segs != 4 {
		t.Fatalf("%d segments for %d bytes in 1 MiB parts, want 4: %v", segs, len(data), raw)
	}
	objs, err := st.List(ctx, "")
	if err != nil || len(objs) != 1 || objs[0].Key != key || objs[0].Size != int64(len(data)) {
		t.Fatalf("list: %+v, %v; want the object alone with its %d bytes", objs, err, len(data))
	}
	if err := st.Put(ctx, key+"/0000000001", strings.NewReader("x")); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("put of a segment's name: %v, want ErrInvalidKey", err)
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if left := names(t, sc, name, ""); len(left) != 0 {
		t.Fatalf("after delete the container holds %v", left)
	}
}

// TestEtcdBackupRestoreObjects reads, lists and deletes a snapshot written
// as etcd-backup-restore writes one: segments <name>/%010d and a dynamic
// large object manifest of 0 bytes whose X-Object-Manifest has no
// trailing slash.
func TestEtcdBackupRestoreObjects(t *testing.T) {
	srv := emulator.Shared(t, emulator.Swift)
	name := container(t, srv)
	sc := client(t, srv)
	ctx := context.Background()
	obj := "etcd-main/v2/Full-00000000-00000042-1700000000"
	var want []byte
	for i := 1; i <= 3; i++ {
		// Three segments hold more than a part: the object is read in
		// ranges.
		part := bytes.Repeat([]byte{byte('a' + i)}, 500_000+i)
		want = append(want, part...)
		if err := objects.Create(ctx, sc, name, fmt.Sprintf("%s/%010d", obj, i), objects.CreateOpts{Content: bytes.NewReader(part)}).Err; err != nil {
			t.Fatal(err)
		}
	}
	err := objects.Create(ctx, sc, name, obj, objects.CreateOpts{Content: bytes.NewReader(nil), ObjectManifest: name + "/" + obj}).Err
	if err != nil {
		t.Fatal(err)
	}
	st, err := swift.New(ctx, swift.Config{Container: name, Prefix: "etcd-main/v2", Credentials: tempauth(srv), Options: testOptions})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "Full")
	if err != nil || len(objs) != 1 || objs[0].Size != int64(len(want)) {
		t.Fatalf("list: %+v, %v; want one object of %d bytes", objs, err, len(want))
	}
	rc, err := st.Get(ctx, objs[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("get: %d bytes, %v; want the segments' %d", len(got), err, len(want))
	}
	if err := st.Delete(ctx, objs[0].Key); err != nil {
		t.Fatal(err)
	}
	if left := names(t, sc, name, ""); len(left) != 0 {
		t.Fatalf("after delete the container holds %v", left)
	}
}

// TestCredentialSources opens stores from URLs, with the credentials where
// etcd-druid and OpenStack's clients keep them.
func TestCredentialSources(t *testing.T) {
	srv := emulator.Shared(t, emulator.Swift)
	name := container(t, srv)
	unset := func(t *testing.T) {
		for _, v := range []string{"OPENSTACK_APPLICATION_CREDENTIALS", "OPENSTACK_APPLICATION_CREDENTIALS_JSON",
			"OS_AUTH_URL", "OS_USERNAME", "OS_PASSWORD", "OS_REGION_NAME", "SOURCE_OPENSTACK_APPLICATION_CREDENTIALS"} {
			t.Setenv(v, "")
		}
	}
	writeDir := func(t *testing.T, fields map[string]string) string {
		dir := t.TempDir()
		for k, v := range fields {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	t.Run("directory", func(t *testing.T) {
		unset(t)
		t.Setenv("OPENSTACK_APPLICATION_CREDENTIALS", writeDir(t, map[string]string{
			"authURL": srv.Endpoint, "username": srv.AccessKey, "password": srv.SecretKey + "\n"}))
		storetest.UseURL(t, "swift://"+name+"/dir")
	})
	t.Run("json", func(t *testing.T) {
		unset(t)
		p := filepath.Join(t.TempDir(), "swift.json")
		body := fmt.Sprintf(`{"authURL":%q,"username":%q,"password":%q,"authType":"password","bucketName":%q}`, srv.Endpoint, srv.AccessKey, srv.SecretKey, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("OPENSTACK_APPLICATION_CREDENTIALS_JSON", p)
		storetest.UseURL(t, "swift://"+name+"/json")
	})
	t.Run("os-variables", func(t *testing.T) {
		unset(t)
		t.Setenv("OS_AUTH_URL", srv.Endpoint)
		t.Setenv("OS_USERNAME", srv.AccessKey)
		t.Setenv("OS_PASSWORD", srv.SecretKey)
		storetest.UseURL(t, "swift://"+name+"/env")
	})
	t.Run("source-prefix", func(t *testing.T) {
		unset(t)
		t.Setenv("SOURCE_OPENSTACK_APPLICATION_CREDENTIALS", writeDir(t, map[string]string{
			"authURL": srv.Endpoint, "username": srv.AccessKey, "password": srv.SecretKey}))
		storetest.UseURL(t, "swift://"+name+"/source?env-prefix=SOURCE_")
	})
	t.Run("nothing", func(t *testing.T) {
		unset(t)
		_, err := store.Open(context.Background(), "swift://"+name+"/x")
		if !errors.Is(err, store.ErrAccessDenied) || !strings.Contains(err.Error(), "OPENSTACK_APPLICATION_CREDENTIALS") {
			t.Fatalf("open without credentials: %v, want a refusal that names the variable", err)
		}
	})
	t.Run("incomplete", func(t *testing.T) {
		unset(t)
		t.Setenv("OPENSTACK_APPLICATION_CREDENTIALS", writeDir(t, map[string]string{
			"authURL": "https://keystone.example:5000/v3", "username": "u", "password": "p"}))
		_, err := store.Open(context.Background(), "swift://"+name+"/x")
		if !errors.Is(err, store.ErrAccessDenied) || !strings.Contains(err.Error(), "domainName, tenantName") {
			t.Fatalf("open with a password but no domain and tenant: %v", err)
		}
	})
	t.Run("rotation", func(t *testing.T) {
		// The password in the credential directory changes under an open
		// store: the next call authenticates with the new one (a wrong
		// one is refused, the right one accepted again).
		unset(t)
		dir := writeDir(t, map[string]string{"authURL": srv.Endpoint, "username": srv.AccessKey, "password": srv.SecretKey})
		t.Setenv("OPENSTACK_APPLICATION_CREDENTIALS", dir)
		ctx := context.Background()
		st, err := store.Open(ctx, "swift://"+name+"/rotation")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, "one", strings.NewReader("1")); err != nil {
			t.Fatal(err)
		}
		write := func(password string) {
			tmp := filepath.Join(dir, ".password.tmp")
			if err := os.WriteFile(tmp, []byte(password), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, "password")); err != nil {
				t.Fatal(err)
			}
		}
		write("retired")
		if _, err := st.List(ctx, ""); !errors.Is(err, store.ErrAccessDenied) {
			t.Fatalf("a list with a wrong password rotated in: %v, want access denied", err)
		}
		write(srv.SecretKey)
		if err := st.Put(ctx, "two", strings.NewReader("2")); err != nil {
			t.Fatalf("a put with the right password rotated back: %v", err)
		}
	})
}

// keystone is a loopback Keystone v3 token endpoint: it checks what the
// store sends, and issues the emulator's own token with a catalog whose
// object-store endpoints are a dead one in RegionTwo and the emulator's
// account in RegionOne.
type keystone struct {
	srv *emulator.Server
	mu  sync.Mutex
	got []map[string]any
}

func (k *keystone) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v3/auth/tokens" {
		http.NotFound(w, r)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	k.mu.Lock()
	k.got = append(k.got, body)
	k.mu.Unlock()
	ident, _ := body["auth"].(map[string]any)["identity"].(map[string]any)
	switch {
	case at(ident, "password", "user", "password") == "s3cret" && at(ident, "password", "user", "name") == "etcd" &&
		at(ident, "password", "user", "domain", "name") == "garden" &&
		at(body, "auth", "scope", "project", "name") == "shoot" && at(body, "auth", "scope", "project", "domain", "name") == "garden":
	case at(ident, "application_credential", "id") == "ac-id" && at(ident, "application_credential", "secret") == "ac-secret":
	default:
		http.Error(w, `{"error":{"code":401,"message":"The request you have made requires authentication."}}`, http.StatusUnauthorized)
		return
	}
	req, _ := http.NewRequest(http.MethodGet, k.srv.Endpoint, nil)
	req.Header.Set("X-Auth-User", k.srv.AccessKey)
	req.Header.Set("X-Auth-Key", k.srv.SecretKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	_ = resp.Body.Close()
	w.Header().Set("X-Subject-Token", resp.Header.Get("X-Auth-Token"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"token": map[string]any{
		"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"catalog": []any{map[string]any{"type": "object-store", "name": "swift", "endpoints": []any{
			map[string]any{"interface": "public", "region": "RegionTwo", "region_id": "RegionTwo", "url": "http://127.0.0.1:9/v1/AUTH_elsewhere"},
			map[string]any{"interface": "internal", "region": "RegionOne", "region_id": "RegionOne", "url": "http://127.0.0.1:9/v1/AUTH_internal"},
			map[string]any{"interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": resp.Header.Get("X-Storage-Url")},
		}}},
	}})
}

func at(m map[string]any, path ...string) string {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[p]
	}
	s, _ := v.(string)
	return s
}

// TestKeystone authenticates as etcd-backup-restore's credential files say,
// with a password scoped to a project and with an application credential,
// at a Keystone v3 on loopback whose token the emulator accepts; the
// region picks the catalog's endpoint.
func TestKeystone(t *testing.T) {
	srv := emulator.Shared(t, emulator.Swift)
	name := container(t, srv)
	ks := &keystone{srv: srv}
	hs := httptest.NewServer(ks)
	t.Cleanup(hs.Close)
	for _, tc := range []struct {
		name   string
		fields map[string]string
	}{
		{"password", map[string]string{"username": "etcd", "password": "s3cret", "domainName": "garden", "tenantName": "shoot"}},
		{"application-credential", map[string]string{"applicationCredentialID": "ac-id", "applicationCredentialName": "etcd-backup",
			"applicationCredentialSecret": "ac-secret", "domainName": "garden", "tenantName": "shoot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OS_REGION_NAME", "")
			dir := t.TempDir()
			tc.fields["authURL"] = hs.URL + "/v3"
			tc.fields["region"] = "RegionOne"
			for k, v := range tc.fields {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("OPENSTACK_APPLICATION_CREDENTIALS", dir)
			storetest.UseURL(t, "swift://"+name+"/"+tc.name)

			// OS_REGION_NAME overrides the file: RegionTwo's endpoint
			// does not answer.
			t.Setenv("OS_REGION_NAME", "RegionTwo")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := store.Open(ctx, "swift://"+name+"/"+tc.name); err == nil || !strings.Contains(err.Error(), "127.0.0.1:9") {
				t.Fatalf("open in RegionTwo: %v, want its endpoint's failure", err)
			}
			t.Setenv("OS_REGION_NAME", "RegionThree")
			if _, err := store.Open(ctx, "swift://"+name+"/"+tc.name); err == nil || !strings.Contains(err.Error(), `region "RegionThree"`) {
				t.Fatalf("open in a region without an endpoint: %v", err)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		t.Setenv("OS_REGION_NAME", "")
		dir := t.TempDir()
		for k, v := range map[string]string{"authURL": hs.URL + "/v3", "username": "etcd", "password": "wrong", "domainName": "garden", "tenantName": "shoot"} {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("OPENSTACK_APPLICATION_CREDENTIALS", dir)
		_, err := store.Open(context.Background(), "swift://"+name+"/refused")
		if !errors.Is(err, store.ErrAccessDenied) || !strings.Contains(err.Error(), "Keystone, password") {
			t.Fatalf("open with a wrong password: %v, want access denied by Keystone", err)
		}
	})
}
