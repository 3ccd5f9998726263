package emulator

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/pki"
)

// KubeOptions configure StartKube. Etcd is required.
type KubeOptions struct {
	// Etcd are the client URLs of the etcd the API server keeps its
	// objects in, alone.
	Etcd []string
	// EtcdCA, EtcdCert and EtcdKey are the files of TLS to etcd; "": plain.
	EtcdCA, EtcdCert, EtcdKey string
	// Dir holds its certificates, keys and token file; "": a temporary
	// directory, removed by Stop.
	Dir string
	// Args are more of kube-apiserver's flags
	// (--encryption-provider-config=…).
	Args []string
}

// KubeAPI is what a client of the API server needs.
type KubeAPI struct {
	// URL is https://127.0.0.1:<port>.
	URL string
	// CAFile is the CA bundle of its serving certificate.
	CAFile string
	// Token is a bearer token of the group system:masters.
	Token string
	// Kubeconfig is a kubeconfig file of that token.
	Kubeconfig string

	o                 KubeOptions
	cert, key, tokens string
	serviceAccountKey string
	client            *http.Client
}

// KubeIssuer is the issuer of the API server's service account tokens.
const KubeIssuer = "https://kubernetes.default.svc.cluster.local"

// StartKube starts kube-apiserver on a free loopback port, over o.Etcd,
// with certificates of its own, a token file whose one token is an
// administrator's, service account tokens and RBAC authorization, and
// waits until it is ready.
func StartKube(ctx context.Context, o KubeOptions) (*Server, error) {
	if len(o.Etcd) == 0 {
		return nil, fmt.Errorf("emulator %s: no etcd to store in", Kube)
	}
	s, err := prepare(Kube, Options{Dir: o.Dir})
	if err != nil {
		return nil, err
	}
	if s.Kube, err = newKubeAPI(s.dir, o); err != nil {
		if s.ownDir {
			_ = os.RemoveAll(s.dir)
		}
		return nil, err
	}
	if err := s.run(ctx, Options{Dir: o.Dir}); err != nil {
		return nil, err
	}
	return s, nil
}

// RequireKube starts kube-apiserver for a test, as Require starts a store
// emulator, and stops it when the test ends.
func RequireKube(t testing.TB, o KubeOptions) *Server {
	t.Helper()
	s, err := StartKube(context.Background(), o)
	return required(t, s, err)
}

func newKubeAPI(dir string, o KubeOptions) (*KubeAPI, error) {
	ca, err := pki.MakeCA(dir, "kube-ca")
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Make("kube-apiserver", pki.LeafOptions{CommonName: "kube-apiserver",
		Hosts: []string{"127.0.0.1", "localhost", "kubernetes.default.svc"}, ServerOnly: true})
	if err != nil {
		return nil, err
	}
	k := &KubeAPI{CAFile: ca.File, o: o, cert: leaf.CertFile, key: leaf.KeyFile,
		tokens: filepath.Join(dir, "tokens.csv"), serviceAccountKey: filepath.Join(dir, "service-accounts.key")}
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	k.Token = hex.EncodeToString(raw)
	if err := os.WriteFile(k.tokens, []byte(k.Token+`,etcdkit-admin,etcdkit-admin,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(sa)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(k.serviceAccountKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if der, err = x509.MarshalPKIXPublicKey(&sa.PublicKey); err != nil {
		return nil, err
	}
	if err := os.WriteFile(k.serviceAccountKey+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(ca.File)
	if err != nil {
		return nil, err
	}
	pool.AppendCertsFromPEM(caPEM)
	k.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	k.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	return k, nil
}

func (k *KubeAPI) args(port int) []string {
	k.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	args := []string{
		"--etcd-servers=" + strings.Join(k.o.Etcd, ","),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + k.cert, "--tls-private-key-file=" + k.key,
		"--token-auth-file=" + k.tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=" + KubeIssuer, "--service-account-key-file=" + k.serviceAccountKey + ".pub",
		"--service-account-signing-key-file=" + k.serviceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		// Nothing runs behind it: no endpoints to keep, no traffic to
		// shape, no cache to warm.
		"--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false", "--watch-cache=false",
		"--profiling=false", "--v=0",
	}
	if k.o.EtcdCA != "" {
		args = append(args, "--etcd-cafile="+k.o.EtcdCA)
	}
	if k.o.EtcdCert != "" {
		args = append(args, "--etcd-certfile="+k.o.EtcdCert, "--etcd-keyfile="+k.o.EtcdKey)
	}
	args = append(args, k.o.Args...)
	// Written once the URL is known; a restart keeps the port.
	_ = k.WriteKubeconfig(k.Kubeconfig, k.Token)
	return args
}

// ready says whether the API server is ready, its post-start work (the
// bootstrap of the RBAC roles among it) done.
func (k *KubeAPI) ready() bool {
	req, err := http.NewRequest(http.MethodGet, k.URL+"/readyz", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+k.Token)
	resp, err := k.client.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// WriteKubeconfig writes a kubeconfig of the API server and token to path.
func (k *KubeAPI) WriteKubeconfig(path, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: etcdkit-test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: etcdkit-test
  user:
    token: %s
contexts:
- name: etcdkit-test
  context:
    cluster: etcdkit-test
    user: etcdkit-test
current-context: etcdkit-test
`, k.URL, k.CAFile, token)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// Kubectl runs the pinned kubectl against the API server as its
// administrator, with stdin, and returns what it printed.
func (k *KubeAPI) Kubectl(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	prog, err := KubectlPath()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, append([]string{"--kubeconfig=" + k.Kubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}

// KubectlPath is the kubectl tools/install-emulators.sh built, at the
// API server's version.
func KubectlPath() (string, error) {
	tools, err := ToolsDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(tools, "bin", "kubectl")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kubectl: %w: %s is missing", ErrNotInstalled, p)
	}
	return p, nil
}
