// Command image writes OCI images of etcdkit's binaries, built beforehand
// by tools/image.sh, into an OCI layout, and pushes them when asked: no
// Docker daemon, no base image to pull. Each image is two layers: the
// files every image shares (a non-root user, Debian's CA bundle, /tmp),
// then the static binary, its entrypoint. The wrapper has one image per
// etcd release it runs: the etcd it embeds, and each etcd server given
// with --etcd in a third layer, which the wrapper runs as its child
// (ETCDKIT_ETCD names it), tagged by the etcd release so that an image
// reference picks the release, as Gardener's etcd-wrapper images do.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The images' user: distroless's nonroot, which the manifests run as.
const uid = 65532

type options struct {
	out, bin, repository, version, revision, source, caBundle, caVersion string
	names, platforms, tags                                               []string
	// etcd are the etcd servers the wrapper runs as processes, one image
	// each; embedded is the release it embeds.
	etcd     []string
	embedded string
	created  time.Time
	push     bool
	// root puts each binary at /<name>, the entrypoint there, as the
	// distroless images of other projects (Gardener's etcd-wrapper) do;
	// description is the images' description label.
	root        bool
	description string
	// sbom is where each image's SBOM is written; "": none.
	sbom string
}

func main() {
	var o options
	var names, platforms, tags, created string
	flag.StringVar(&o.out, "out", "", "OCI layout directory to write (replaced)")
	flag.StringVar(&o.bin, "bin", "", "directory of the binaries, as <os>_<arch>/<name>")
	flag.StringVar(&names, "names", "etcd-wrapper,etcd-backup", "the binaries, one image each")
	flag.StringVar(&platforms, "platforms", "linux/amd64", "platforms of each image, comma-separated")
	flag.StringVar(&o.repository, "repository", "ghcr.io/etcdkit", "where the images are named (and pushed)")
	flag.StringVar(&tags, "tags", "latest", "tags of each image, comma-separated")
	flag.StringVar(&o.version, "version", "", "the binaries' version, for the labels")
	flag.StringVar(&o.revision, "revision", "", "the commit they were built from")
	flag.StringVar(&o.source, "source", "https://github.com/etcdkit/etcdkit", "the source repository")
	flag.StringVar(&created, "created", "", "RFC 3339 time of the commit: every file's time and the images' creation")
	flag.StringVar(&o.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to install")
	flag.StringVar(&o.caVersion, "ca-version", "", "the version of Debian's ca-certificates it comes from")
	flag.BoolVar(&o.push, "push", false, "push the images to --repository (credentials of docker's config)")
	var etcd string
	flag.StringVar(&etcd, "etcd", "", "etcd server releases (3.5.35,3.6.16) the wrapper runs as its child, one image each: the binaries are <bin>/<os>_<arch>/etcd-<release>")
	flag.StringVar(&o.embedded, "embedded-etcd", "", "the etcd release the wrapper embeds, which its plain image is tagged with")
	flag.StringVar(&o.sbom, "sbom", "", "directory to write each image's CycloneDX SBOM to, made of the binaries' <bin>/<os>_<arch>/<name>.cdx.json; empty: none")
	flag.BoolVar(&o.root, "root", false, "each binary at /<name>, the entrypoint there (another project's layout); default /usr/local/bin/<name>")
	flag.StringVar(&o.description, "description", "", "the images' description label; default \"etcdkit's <name>\"")
	flag.Parse()
	if etcd != "" {
		o.etcd = strings.Split(etcd, ",")
	}
	o.names, o.platforms, o.tags = strings.Split(names, ","), strings.Split(platforms, ","), strings.Split(tags, ",")
	var err error
	if o.created, err = time.Parse(time.RFC3339, created); err != nil {
		fail(fmt.Errorf("--created: %w", err))
	}
	if o.out == "" || o.bin == "" || o.version == "" || o.caVersion == "" {
		fail(errors.New("--out, --bin, --version and --ca-version are required"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

func run(ctx context.Context, o options) error {
	base, err := baseLayer(o)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	p, err := layout.Write(o.out, empty.Index)
	if err != nil {
		return fmt.Errorf("layout %s: %w", o.out, err)
	}
	for _, n := range o.names {
		idx, err := imageIndex(o, n, base, "")
		if err != nil {
			return err
		}
		tags := o.tags
		if n == "etcd-wrapper" && o.embedded != "" {
			tags = append(tags, etcdTags(o.tags, o.embedded)...)
		}
		if err := write(ctx, o, p, n, idx, tags); err != nil {
			return err
		}
		if n != "etcd-wrapper" {
			continue
		}
		for _, v := range o.etcd {
			idx, err := imageIndex(o, n, base, v)
			if err != nil {
				return err
			}
			if err := write(ctx, o, p, n, idx, etcdTags(o.tags, v)); err != nil {
				return err
			}
		}
	}
	return nil
}

// etcdTags are the tags of the wrapper's image that runs etcd release v:
// etcd<v> and etcd<minor> for latest, <tag>-etcd<v> for a version's.
func etcdTags(tags []string, v string) []string {
	var out []string
	for _, t := range tags {
		if t == "latest" {
			minor := strings.Join(strings.SplitN(v, ".", 3)[:2], ".")
			out = append(out, "etcd"+v, "etcd"+minor)
			continue
		}
		out = append(out, t+"-etcd"+v)
	}
	return out
}

// write adds the image of binary n to the layout under each tag, and
// pushes it when asked.
func write(ctx context.Context, o options, p layout.Path, n string, idx v1.ImageIndex, tags []string) error {
	for _, tag := range tags {
		ref := fmt.Sprintf("%s/%s:%s", o.repository, n, tag)
		if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		digest, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s\n", ref, digest)
		if !o.push {
			continue
		}
		r, err := name.ParseReference(ref)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		fmt.Printf("pushed %s\n", ref)
	}
	return nil
}

// imageIndex is the image of one binary, for every platform; with etcd,
// the wrapper's image that runs that etcd server release as its child.
func imageIndex(o options, n string, base v1.Layer, etcd string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, platform := range o.platforms {
		goos, arch, ok := strings.Cut(platform, "/")
		if !ok {
			return nil, fmt.Errorf("platform %q: want os/arch", platform)
		}
		bin, err := os.ReadFile(filepath.Join(o.bin, goos+"_"+arch, n))
		if err != nil {
			return nil, err
		}
		files, entrypoint := []file{
			{path: "usr/", dir: true}, {path: "usr/local/", dir: true}, {path: "usr/local/bin/", dir: true},
			{path: "usr/local/bin/" + n, mode: 0o755, data: bin},
		}, "/usr/local/bin/"+n
		if o.root {
			files, entrypoint = []file{{path: n, mode: 0o755, data: bin}}, "/"+n
		}
		binLayer, err := layer(o.created, files)
		if err != nil {
			return nil, err
		}
		at := v1.Time{Time: o.created}
		layers := []mutate.Addendum{
			{Layer: base, History: v1.History{Created: at, CreatedBy: "tools/image.sh: user 65532, CA bundle, /tmp"}},
			{Layer: binLayer, History: v1.History{Created: at, CreatedBy: "tools/image.sh: " + n}},
		}
		env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}
		release := o.embedded
		if etcd != "" {
			server, err := os.ReadFile(filepath.Join(o.bin, goos+"_"+arch, "etcd-"+etcd))
			if err != nil {
				return nil, err
			}
			etcdLayer, err := layer(o.created, []file{{path: "usr/local/bin/etcd", mode: 0o755, data: server}})
			if err != nil {
				return nil, err
			}
			layers = append(layers, mutate.Addendum{Layer: etcdLayer, History: v1.History{Created: at, CreatedBy: "tools/image.sh: etcd " + etcd}})
			env = append(env, "ETCDKIT_ETCD=/usr/local/bin/etcd")
			release = etcd
		}
		img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
		if err != nil {
			return nil, err
		}
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		description := o.description
		if description == "" {
			description = "etcdkit's " + n
		}
		cfg = cfg.DeepCopy()
		cfg.OS, cfg.Architecture, cfg.Created = goos, arch, at
		cfg.Config = v1.Config{
			Entrypoint: []string{entrypoint},
			User:       fmt.Sprintf("%d:%d", uid, uid),
			WorkingDir: "/home/nonroot",
			Env:        env,
			Labels: map[string]string{
				"org.opencontainers.image.title":       n,
				"org.opencontainers.image.description": description,
				"org.opencontainers.image.version":     o.version,
				"org.opencontainers.image.revision":    o.revision,
				"org.opencontainers.image.source":      o.source,
				"org.opencontainers.image.created":     o.created.UTC().Format(time.RFC3339),
				"org.etcdkit.ca-certificates":          o.caVersion,
			},
		}
		if n == "etcd-wrapper" && release != "" {
			cfg.Config.Labels["org.etcdkit.etcd"] = release
		}
		if img, err = mutate.ConfigFile(img, cfg); err != nil {
			return nil, err
		}
		if o.sbom != "" {
			digest, err := img.Digest()
			if err != nil {
				return nil, err
			}
			if err := imageSBOM(o, n, etcd, goos, arch, digest.String()); err != nil {
				return nil, err
			}
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: goos, Architecture: arch},
		}})
	}
	return idx, nil
}

// baseLayer holds what every image shares: the user, the CA bundle, /tmp
// and the user's home.
func baseLayer(o options) (v1.Layer, error) {
	ca, err := os.ReadFile(o.caBundle)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle (install Debian's ca-certificates): %w", err)
	}
	return layer(o.created, []file{
		{path: "etc/", dir: true},
		{path: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)},
		{path: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", uid)},
		// Go's resolver reads the hosts file first, as glibc's default.
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: "etc/ssl/", dir: true}, {path: "etc/ssl/certs/", dir: true},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca},
		{path: "tmp/", dir: true, mode: 0o1777},
		{path: "home/", dir: true},
		{path: "home/nonroot/", dir: true, mode: 0o700, owner: uid},
	})
}

type file struct {
	path  string
	dir   bool
	mode  int64
	owner int
	data  []byte
}

// layer is a gzipped tar of files, every time set to created so that the
// same commit makes the same image.
func layer(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, Uid: f.owner, Gid: f.owner, ModTime: created, Format: tar.FormatPAX}
		switch {
		case f.dir:
			h.Typeflag = tar.TypeDir
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}
