package azure_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/etcdkit/etcdkit/internal/emulator"
	"github.com/etcdkit/etcdkit/internal/pki"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/azure"
)

// entra is a Microsoft Entra token endpoint on loopback: it exchanges a
// federated token (workload identity) or answers a managed identity's
// request, and issues an access token with the claims Azurite checks.
type entra struct {
	tenant, client, federated, identityHeader string
	// audience of the tokens issued; "" is Azure Storage's.
	audience string

	mu     sync.Mutex
	issued []string // how each token was asked for
}

func (e *entra) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	base := "https://" + r.Host + "/" + e.tenant
	switch r.URL.Path {
	case "/" + e.tenant + "/v2.0/.well-known/openid-configuration":
		writeJSON(w, map[string]any{
			"token_endpoint":         base + "/oauth2/v2.0/token",
			"authorization_endpoint": base + "/oauth2/v2.0/authorize",
			"issuer":                 base + "/v2.0",
		})
	case "/" + e.tenant + "/oauth2/v2.0/token":
		_ = r.ParseForm()
		if r.Form.Get("client_assertion") != e.federated || !strings.HasPrefix(r.Form.Get("client_id"), e.client) ||
			!strings.Contains(" "+r.Form.Get("scope")+" ", " https://storage.azure.com/.default ") {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]any{"error": "invalid_client", "error_description": "AADSTS700211: unexpected request " + r.Form.Encode()})
			return
		}
		e.note("workload identity " + r.Form.Get("client_assertion"))
		writeJSON(w, map[string]any{"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600, "access_token": e.token()})
	case "/msi/token":
		if r.Header.Get("X-Identity-Header") != e.identityHeader || r.URL.Query().Get("resource") != "https://storage.azure.com" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		e.note("managed identity")
		writeJSON(w, map[string]any{"token_type": "Bearer", "access_token": e.token(), "resource": "https://storage.azure.com",
			"expires_on": time.Now().Add(time.Hour).Unix()})
	default:
		http.NotFound(w, r)
	}
}

func (e *entra) note(how string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.issued = append(e.issued, how)
}

func (e *entra) asked() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.issued...)
}

// token is a JWT Azurite's basic OAuth check takes: its claims, not its
// signature.
func (e *entra) token() string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now().Unix()
	e.mu.Lock()
	aud := cmp.Or(e.audience, "https://storage.azure.com")
	e.mu.Unlock()
	return enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + enc(map[string]any{
		"aud": aud, "iss": "https://sts.windows.net/" + e.tenant + "/",
		"iat": now - 60, "nbf": now - 60, "exp": now + 3600, "tid": e.tenant, "appid": e.client, "oid": e.client,
	}) + ".c2lnbmF0dXJl"
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// TestPodIdentity: with no key anywhere, the store takes Azure's default
// credential chain: a workload identity (a federated token file exchanged
// at Entra) and a managed identity (the identity endpoint of the pod),
// against Azurite that takes OAuth bearer tokens over HTTPS.
func TestPodIdentity(t *testing.T) {
	dir := t.TempDir()
	ca := pki.NewCA(t, dir, "ca")
	leaf := ca.Issue(t, "server", pki.LeafOptions{ServerOnly: true})
	srv := emulator.RequireWith(t, emulator.Azure, emulator.Options{AzureCert: leaf.CertFile, AzureKey: leaf.KeyFile})

	pem, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}

	// The container is made with the shared key, which Azurite still takes.
	ctx := context.Background()
	cred, err := container.NewSharedKeyCredential(srv.Account, srv.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/identity", cred,
		&container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: transport}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, nil); err != nil {
		t.Fatal(err)
	}

	cert, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	id := &entra{tenant: "72f988bf-86f1-41af-91ab-2d7cd011db47", client: "etcd-backup-client", federated: "a-federated-token", identityHeader: "pod-secret"}
	hs := httptest.NewUnstartedServer(id)
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	// A pod's managed identity endpoint speaks plain HTTP on the node.
	msi := httptest.NewServer(id)
	t.Cleanup(msi.Close)

	clear := func(t *testing.T) {
		for _, v := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_APPLICATION_CREDENTIALS_JSON", "AZURE_APPLICATION_CREDENTIALS",
			"AZURE_STORAGE_KEY", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME",
			"AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_AUTHORITY_HOST",
			"IDENTITY_ENDPOINT", "IDENTITY_HEADER", "MSI_ENDPOINT", "MSI_SECRET", "IMDS_ENDPOINT"} {
			// Unset, not empty: the SDK takes a variable set empty for
			// an empty value.
			t.Setenv(v, "")
			_ = os.Unsetenv(v)
		}
		// etcd-druid sets the credential variables where no secret is
		// mounted.
		t.Setenv("AZURE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "absent"))
	}
	use := func(t *testing.T, prefix string) {
		t.Helper()
		st, err := azure.New(ctx, azure.Config{Container: "identity", Prefix: prefix, Account: srv.Account, Endpoint: srv.Endpoint,
			Options: store.Options{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, "k", strings.NewReader("v")); err != nil {
			t.Fatal(err)
		}
		objs, err := st.List(ctx, "")
		if err != nil || len(objs) != 1 {
			t.Fatalf("list: %v, %v", objs, err)
		}
	}
	t.Run("workload-identity", func(t *testing.T) {
		clear(t)
		tokenFile := filepath.Join(t.TempDir(), "azure-identity-token")
		if err := os.WriteFile(tokenFile, []byte(id.federated), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AZURE_FEDERATED_TOKEN_FILE", tokenFile)
		t.Setenv("AZURE_CLIENT_ID", id.client)
		t.Setenv("AZURE_TENANT_ID", id.tenant)
		t.Setenv("AZURE_AUTHORITY_HOST", hs.URL+"/")
		use(t, "workload")
		if got := id.asked(); len(got) == 0 || got[len(got)-1] != "workload identity "+id.federated {
			t.Fatalf("tokens issued: %v, want one for the federated token", got)
		}
	})
	t.Run("managed-identity", func(t *testing.T) {
		clear(t)
		t.Setenv("IDENTITY_ENDPOINT", msi.URL+"/msi/token")
		t.Setenv("IDENTITY_HEADER", id.identityHeader)
		use(t, "managed")
		if got := id.asked(); len(got) == 0 || got[len(got)-1] != "managed identity" {
			t.Fatalf("tokens issued: %v, want one for the managed identity", got)
		}
	})
	t.Run("a-token-for-another-service", func(t *testing.T) {
		// Azurite checks the token: one for another audience is refused,
		// so the calls above carried the token Entra issued. (Another
		// client ID: the SDK keeps tokens per client.)
		clear(t)
		tokenFile := filepath.Join(t.TempDir(), "azure-identity-token")
		if err := os.WriteFile(tokenFile, []byte(id.federated), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("AZURE_FEDERATED_TOKEN_FILE", tokenFile)
		t.Setenv("AZURE_CLIENT_ID", id.client+"-second")
		t.Setenv("AZURE_TENANT_ID", id.tenant)
		t.Setenv("AZURE_AUTHORITY_HOST", hs.URL+"/")
		id.mu.Lock()
		id.audience = "https://vault.azure.net"
		id.mu.Unlock()
		_, err := azure.New(ctx, azure.Config{Container: "identity", Account: srv.Account, Endpoint: srv.Endpoint,
			Options: store.Options{Transport: transport}})
		if !errors.Is(err, store.ErrAccessDenied) {
			t.Fatalf("open with a token for another audience: %v, want access denied", err)
		}
	})
}
