package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdkit/etcdkit/internal/freeport"
)

const repository = "ghcr.io/etcdkit"

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

type config struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		User       string            `json:"User"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// layout reads an OCI layout's blobs, checking each one's digest.
type layout struct {
	t   *testing.T
	dir string
}

func (l layout) blob(d descriptor) []byte {
	l.t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		l.t.Fatalf("digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(l.dir, "blobs", "sha256", hexDigest))
	if err != nil {
		l.t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest || int64(len(b)) != d.Size {
		l.t.Fatalf("blob %s: %d bytes of digest %x, the descriptor says %d", d.Digest, len(b), sum, d.Size)
	}
	return b
}

func (l layout) json(d descriptor, v any) {
	l.t.Helper()
	if err := json.Unmarshal(l.blob(d), v); err != nil {
		l.t.Fatalf("%s: %v", d.Digest, err)
	}
}

// The images tools/image.sh builds, read back: an OCI index per binary
// with this machine's platform, a config whose entrypoint is the binary
// and whose user is not root, labels naming the version, commit and
// source, a layer with the user and Debian's CA bundle, and the static
// binary, which runs and says the version the labels say; beside the
// layout, each image's SBOM and each binary's.
func TestImages(t *testing.T) {
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "bash", "../../tools/image.sh", "--out", out, "--platforms", "linux/"+runtime.GOARCH)
	// With the tests' own Go, whose build cache holds the packages: what
	// is checked here is the images' making, not the release toolchain
	// (tools/release.sh builds with it, tools/vulncheck.sh checks it).
	build.Env = append(os.Environ(), "GOTOOLCHAIN="+runtime.Version())
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tools/image.sh: %v\n%s", err, b)
	}
	l := layout{t: t, dir: filepath.Join(out, "oci")}
	if b, err := os.ReadFile(filepath.Join(l.dir, "oci-layout")); err != nil || !strings.Contains(string(b), `"imageLayoutVersion": "1.0.0"`) {
		t.Fatalf("oci-layout: %s %v", b, err)
	}
	var top index
	b, err := os.ReadFile(filepath.Join(l.dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	refs := map[string]descriptor{}
	for _, d := range top.Manifests {
		refs[d.Annotations["org.opencontainers.image.ref.name"]] = d
	}
	for _, name := range []string{"etcd-wrapper", "etcd-backup"} {
		t.Run(name, func(t *testing.T) {
			l.t = t
			d, ok := refs[repository+"/"+name+":latest"]
			if !ok || d.MediaType != "application/vnd.oci.image.index.v1+json" {
				t.Fatalf("no image index %s/%s:latest in %v", repository, name, refs)
			}
			m, digest := platformManifest(l, d)
			if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(m.Layers) != 2 {
				t.Fatalf("no linux/%s manifest of two layers: %+v", runtime.GOARCH, m)
			}
			var cfg config
			l.json(m.Config, &cfg)
			c := cfg.Config
			bin := "/usr/local/bin/" + name
			if len(c.Entrypoint) != 1 || c.Entrypoint[0] != bin || len(c.Cmd) != 0 {
				t.Errorf("entrypoint %v, cmd %v: want %s alone, so that a pod's args are the binary's", c.Entrypoint, c.Cmd, bin)
			}
			if c.User != "65532:65532" || cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
				t.Errorf("user %q, platform %s/%s", c.User, cfg.OS, cfg.Architecture)
			}
			for _, label := range []string{"version", "revision", "source", "created", "title"} {
				if c.Labels["org.opencontainers.image."+label] == "" {
					t.Errorf("no label org.opencontainers.image.%s: %v", label, c.Labels)
				}
			}
			if !regexp.MustCompile(`^\d{8}`).MatchString(c.Labels["org.etcdkit.ca-certificates"]) {
				t.Errorf("the CA bundle's Debian version: %q", c.Labels["org.etcdkit.ca-certificates"])
			}

			files := map[string]*tar.Header{}
			contents := map[string][]byte{}
			for i, ld := range m.Layers {
				if ld.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
					t.Fatalf("layer %d is %s", i, ld.MediaType)
				}
				diffID := readLayer(t, l.blob(ld), func(h *tar.Header, data []byte) {
					files[h.Name], contents[h.Name] = h, data
				})
				if diffID != cfg.RootFS.DiffIDs[i] {
					t.Fatalf("layer %d's uncompressed digest %s, the config says %s", i, diffID, cfg.RootFS.DiffIDs[i])
				}
			}
			if !strings.Contains(string(contents["etc/passwd"]), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd: %q", contents["etc/passwd"])
			}
			bundle := contents["etc/ssl/certs/ca-certificates.crt"]
			if n := strings.Count(string(bundle), "BEGIN CERTIFICATE"); n < 100 || !x509.NewCertPool().AppendCertsFromPEM(bundle) {
				t.Errorf("the CA bundle holds %d certificates", n)
			}
			if h := files["tmp/"]; h == nil || h.Mode&0o1777 != 0o1777 {
				t.Errorf("/tmp: %+v", h)
			}
			h := files[strings.TrimPrefix(bin, "/")]
			if h == nil || h.Mode&0o111 == 0 {
				t.Fatalf("%s in the image: %+v", bin, h)
			}

			// The binary, taken out of the image: static, and of the
			// version the labels say.
			exe := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(exe, contents[h.Name], 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s is linked dynamically", name)
				}
			}
			_ = f.Close()
			ver, err := exec.CommandContext(ctx, exe, "version").Output()
			if err != nil {
				t.Fatalf("%s version: %v", name, err)
			}
			lines := strings.Split(string(ver), "\n")
			want := name + " " + c.Labels["org.opencontainers.image.version"]
			if lines[0] != want {
				t.Errorf("%s version says %q, the label %q", name, lines[0], want)
			}
			if len(lines) < 2 || !strings.HasPrefix(lines[1], "commit "+c.Labels["org.opencontainers.image.revision"]) {
				t.Errorf("%s version: %q, the label's commit %s", name, ver, c.Labels["org.opencontainers.image.revision"])
			}
			t.Logf("%s: %s, %d bytes compressed, %s", name, lines[0], m.Layers[0].Size+m.Layers[1].Size, c.Labels["org.etcdkit.ca-certificates"])
			checkSBOM(t, out, name, "", digest, c.Labels, map[string][]byte{name: contents[h.Name]})
		})
	}

	// The wrapper's images by etcd release: the one it embeds is the
	// plain image under the release's tags; each other release's adds
	// that etcd server, which the wrapper, as the image configures it,
	// runs as its child: a member taken out of the image starts and
	// answers as that release.
	plain := refs[repository+"/etcd-wrapper:latest"]
	for _, tag := range []string{"etcd3.7", "etcd3.7.3"} {
		if d, ok := refs[repository+"/etcd-wrapper:"+tag]; !ok || d.Digest != plain.Digest {
			t.Errorf("etcd-wrapper:%s is %v, want the plain image %s", tag, d.Digest, plain.Digest)
		}
	}
	for _, release := range []string{"3.5", "3.6"} {
		t.Run("etcd-wrapper:etcd"+release, func(t *testing.T) {
			l.t = t
			d, ok := refs[repository+"/etcd-wrapper:etcd"+release]
			if !ok {
				t.Fatalf("no etcd-wrapper:etcd%s in %v", release, refs)
			}
			cfg, files, digest := image(l, d)
			v := cfg.Config.Labels["org.etcdkit.etcd"]
			if !strings.HasPrefix(v, release+".") || refs[repository+"/etcd-wrapper:etcd"+v].Digest != d.Digest {
				t.Fatalf("label org.etcdkit.etcd %q, tag etcd%s %v", v, v, refs[repository+"/etcd-wrapper:etcd"+v])
			}
			if !slices.Contains(cfg.Config.Env, "ETCDKIT_ETCD=/usr/local/bin/etcd") {
				t.Fatalf("env %v: the wrapper is not told to run the image's etcd", cfg.Config.Env)
			}
			dir := t.TempDir()
			for _, name := range []string{"etcd-wrapper", "etcd"} {
				if err := os.WriteFile(filepath.Join(dir, name), files["usr/local/bin/"+name], 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ver, err := exec.CommandContext(ctx, filepath.Join(dir, "etcd"), "--version").Output()
			if err != nil || !strings.Contains(string(ver), "etcd Version: "+v+"\n") {
				t.Fatalf("the image's etcd --version: %v\n%s", err, ver)
			}
			checkSBOM(t, out, "etcd-wrapper", v, digest, cfg.Config.Labels, map[string][]byte{
				"etcd-wrapper": files["usr/local/bin/etcd-wrapper"], "etcd-" + v: files["usr/local/bin/etcd"],
			})
			runMember(ctx, t, dir, v)
		})
	}

	// The manifests run these images.
	manifests, err := filepath.Glob("../kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	image := regexp.MustCompile(`image: (` + regexp.QuoteMeta(repository) + `/[^:\s]+):`)
	for _, file := range manifests {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if m := image.FindStringSubmatch(sc.Text()); m != nil {
				if _, ok := refs[m[1]+":latest"]; !ok {
					t.Errorf("%s runs %s, which tools/image.sh does not build", file, m[1])
				}
			}
		}
		_ = f.Close()
	}
}

// readLayer calls f with every file of a gzipped tar layer and returns
// the digest of the uncompressed tar.
func readLayer(t *testing.T, blob []byte, f func(*tar.Header, []byte)) string {
	t.Helper()
	gz, err := gzip.NewReader(strings.NewReader(string(blob)))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.New()
	tr := tar.NewReader(io.TeeReader(gz, sum))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f(h, data)
	}
	// The padding after the last entry belongs to the digest too.
	if _, err := io.Copy(io.Discard, io.TeeReader(gz, sum)); err != nil {
		t.Fatal(err)
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}

// platformManifest is the manifest of index d for this machine's
// platform, and its digest.
func platformManifest(l layout, d descriptor) (manifest, string) {
	l.t.Helper()
	var idx index
	l.json(d, &idx)
	var m manifest
	var digest string
	for _, p := range idx.Manifests {
		if p.Platform != nil && p.Platform.OS == "linux" && p.Platform.Architecture == runtime.GOARCH {
			l.json(p, &m)
			digest = p.Digest
		}
	}
	return m, digest
}

// image is the config and the files of d's image for this machine's
// platform, and its manifest's digest.
func image(l layout, d descriptor) (config, map[string][]byte, string) {
	l.t.Helper()
	m, digest := platformManifest(l, d)
	var cfg config
	l.json(m.Config, &cfg)
	files := map[string][]byte{}
	for _, ld := range m.Layers {
		readLayer(l.t, l.blob(ld), func(h *tar.Header, data []byte) { files[h.Name] = data })
	}
	return cfg, files, digest
}

// runMember starts the wrapper in dir, with ETCDKIT_ETCD naming the etcd
// beside it as the image does, on a member of its own, and waits until
// the member is ready and answers as etcd release v; SIGTERM stops it.
func runMember(ctx context.Context, t *testing.T, dir, v string) {
	t.Helper()
	var ports [3]int
	for i := range ports {
		p, err := freeport.Pick()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	peer, client := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	conf := filepath.Join(dir, "etcd.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "name: m0\ndata-dir: %s\nlisten-peer-urls: %s\ninitial-advertise-peer-urls: %[2]s\nlisten-client-urls: %s\nadvertise-client-urls: %[3]s\ninitial-cluster: m0=%[2]s\n",
		filepath.Join(dir, "data"), peer, client), 0o600); err != nil {
		t.Fatal(err)
	}
	health := fmt.Sprintf("127.0.0.1:%d", ports[2])
	var out strings.Builder
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "etcd-wrapper"), "--config", conf, "--listen", health)
	cmd.Env = append(os.Environ(), "ETCDKIT_ETCD="+filepath.Join(dir, "etcd"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	hc := &http.Client{Timeout: 10 * time.Second}
	ready := func() bool {
		resp, err := hc.Get("http://" + health + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for !ready() {
		select {
		case err := <-exited:
			t.Fatalf("etcd-wrapper with ETCDKIT_ETCD exited before it was ready: %v\n%s", err, out.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("etcd-wrapper with ETCDKIT_ETCD not ready within a minute\n%s", out.String())
		case <-tick.C:
		}
	}
	resp, err := hc.Get(client + "/version")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !strings.Contains(string(b), `"etcdserver":"`+v+`"`) {
		t.Errorf("the member answers %s, want etcd %s", b, v)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("etcd-wrapper on SIGTERM: %v\n%s", err, out.String())
	}
	t.Logf("etcd-wrapper:etcd%s runs etcd %s as its child: %s", v, v, b)
}
