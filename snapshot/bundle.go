package snapshot

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"filippo.io/age"

	"github.com/etcdkit/etcdkit/store"
)

// A restore bundle holds the files a restored cluster needs besides its
// keys: for Kubernetes, the kube-apiserver's EncryptionConfiguration and
// keys (without them every Secret restored is unreadable) and the
// cluster's PKI. It is a tar of those files sealed with age to the
// backups' recipients, stored beside a full as
// etcdkit/bundles/Full-<start>-<last>-<unix>-<digest>.tar.age, and
// written only when the files changed since the store's newest bundle:
// the digest in its name (the first 16 bytes of the tar's SHA-256) tells
// without decrypting. A restore of a chain takes the newest bundle
// written beside its full or before it.

// MaxBundle bounds a bundle's files together: keys, certificates and
// configuration, not data.
const MaxBundle = 16 << 20

// ErrBundleNotSealed: a bundle holds keys; it is written only sealed.
var ErrBundleNotSealed = errors.New("a restore bundle holds keys and is written only encrypted: give the backups age recipients (--encrypt-to or --passphrase-file)")

// Bundle is a restore bundle on the store.
type Bundle struct {
	Key string
	// Full is the full it was written beside, as its name says (Key and
	// Timeline unset).
	Full Snapshot
	// Digest is the hex of the first 16 bytes of the tar's SHA-256.
	Digest string
	Size   int64
}

// PackBundle tars the files of paths (each a file, or a directory whose
// regular files are all taken), by their absolute paths, in a form that
// depends on their contents and modes alone, and says its digest.
func PackBundle(paths []string) ([]byte, string, error) {
	files := map[string]string{} // name in the tar → file
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, "", fmt.Errorf("bundle: %w", err)
		}
		err = filepath.WalkDir(abs, func(file string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if info, err := os.Stat(file); err == nil && info.Mode().IsRegular() {
				files[strings.TrimPrefix(filepath.ToSlash(file), "/")] = file
			}
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("bundle: %w", err)
		}
	}
	if len(files) == 0 {
		return nil, "", fmt.Errorf("bundle: %v hold no files", paths)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		b, err := os.ReadFile(files[name])
		if err != nil {
			return nil, "", fmt.Errorf("bundle: %w", err)
		}
		info, err := os.Stat(files[name])
		if err != nil {
			return nil, "", fmt.Errorf("bundle: %w", err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(info.Mode().Perm()), Size: int64(len(b)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, "", err
		}
		if buf.Len() > MaxBundle {
			return nil, "", fmt.Errorf("bundle: %v hold more than %d MiB: a bundle is for keys, certificates and configuration", paths, MaxBundle>>20)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:16]), nil
}

// WriteBundle writes the bundle of paths beside full, sealed to c's
// recipients, unless the store's newest bundle holds the same files; it
// says whether it wrote one.
func WriteBundle(ctx context.Context, st store.Store, full Snapshot, paths []string, c Codec) (Bundle, bool, error) {
	if !c.encrypts() {
		return Bundle{}, false, ErrBundleNotSealed
	}
	tarball, digest, err := PackBundle(paths)
	if err != nil {
		return Bundle{}, false, err
	}
	bundles, err := ListBundles(ctx, st)
	if err != nil {
		return Bundle{}, false, err
	}
	if n := len(bundles); n > 0 && bundles[n-1].Digest == digest {
		return bundles[n-1], false, nil
	}
	b := Bundle{Full: full, Digest: digest,
		Key: fmt.Sprintf("%s/Full-%08d-%08d-%d-%s.tar.age", bundleDir, full.StartRevision, full.LastRevision, full.Created.Unix(), digest)}
	b.Size, err = put(ctx, st, b.Key, Codec{Recipients: c.Recipients}, lean, func(w io.Writer) error {
		_, err := w.Write(tarball)
		return err
	})
	if err != nil {
		return Bundle{}, false, fmt.Errorf("bundle: %w", err)
	}
	return b, true, nil
}

// ListBundles lists st's bundles, oldest full first.
func ListBundles(ctx context.Context, st store.Store) ([]Bundle, error) {
	objs, err := st.List(ctx, bundleDir+"/")
	if err != nil {
		return nil, fmt.Errorf("list bundles: %w", err)
	}
	var out []Bundle
	for _, o := range objs {
		name, ok := strings.CutSuffix(path.Base(o.Key), ".tar.age")
		i := strings.LastIndexByte(name, '-')
		if !ok || i < 0 {
			continue
		}
		full, err := Parse(dirV2 + "/" + name[:i])
		if err != nil || full.Kind != KindFull {
			continue
		}
		out = append(out, Bundle{Key: o.Key, Full: full, Digest: name[i+1:], Size: o.Size})
	}
	slices.SortStableFunc(out, func(a, b Bundle) int {
		return cmp.Or(a.Full.Created.Compare(b.Full.Created), cmp.Compare(a.Full.LastRevision, b.Full.LastRevision), strings.Compare(a.Key, b.Key))
	})
	return out, nil
}

// BundleFor is the bundle a restore of the chain full begins takes: the
// newest written beside it or before it.
func BundleFor(bundles []Bundle, full Snapshot) (Bundle, bool) {
	for i := len(bundles) - 1; i >= 0; i-- {
		if !bundles[i].Full.Created.After(full.Created) {
			return bundles[i], true
		}
	}
	return Bundle{}, false
}

// ExtractBundle opens b with c's identities and writes its files under
// dir, by the paths they were taken from (/etc/kubernetes/pki/ca.crt is
// dir/etc/kubernetes/pki/ca.crt), with their modes. A file already there
// is never overwritten: the extraction stops before writing anything.
// It returns the files written.
func ExtractBundle(ctx context.Context, st store.Store, b Bundle, c Codec, dir string) ([]string, error) {
	if len(c.Identities) == 0 {
		return nil, fmt.Errorf("bundle %s is encrypted and no identity was given to decrypt it (--identity-file or --passphrase-file)", b.Key)
	}
	obj, err := st.Get(ctx, b.Key)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Key, err)
	}
	defer func() { _ = obj.Close() }()
	dec, err := age.Decrypt(obj, c.Identities...)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: decrypt: %w", b.Key, err)
	}
	tarball, err := io.ReadAll(io.LimitReader(dec, MaxBundle+1<<20))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", b.Key, err)
	}
	type file struct {
		name string
		mode fs.FileMode
		data []byte
	}
	var files []file
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", b.Key, err)
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(filepath.FromSlash(h.Name)) {
			return nil, fmt.Errorf("bundle %s: %q is not a file etcdkit bundles", b.Key, h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", b.Key, err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if _, err := os.Lstat(target); err == nil {
			return nil, fmt.Errorf("bundle %s: %s exists: extract into an empty directory, then put the files in place", b.Key, target)
		}
		files = append(files, file{target, fs.FileMode(h.Mode).Perm(), data})
	}
	var written []string
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		if err := os.MkdirAll(filepath.Dir(f.name), 0o700); err != nil {
			return written, err
		}
		// Created, never replaced: O_EXCL.
		out, err := os.OpenFile(f.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return written, err
		}
		_, err = out.Write(f.data)
		if err = errors.Join(err, out.Sync(), out.Close()); err != nil {
			return written, err
		}
		written = append(written, f.name)
	}
	return written, nil
}

// neededBundles are the bundles the restores of fulls take, and the
// newest, which the fulls to come take while the files do not change.
func neededBundles(bundles []Bundle, fulls []Snapshot) map[string]bool {
	needed := map[string]bool{}
	if n := len(bundles); n > 0 {
		needed[bundles[n-1].Key] = true
	}
	for _, f := range fulls {
		if b, ok := BundleFor(bundles, f); ok {
			needed[b.Key] = true
		}
	}
	return needed
}

// pruneBundles deletes the bundles no kept full takes; a locked one
// stays. It says how many went.
func pruneBundles(ctx context.Context, st store.Store, kept []Kept) (int, error) {
	bundles, err := ListBundles(ctx, st)
	if err != nil || len(bundles) < 2 {
		return 0, err
	}
	var fulls []Snapshot
	for _, k := range kept {
		if k.Snapshot.Kind == KindFull {
			fulls = append(fulls, k.Snapshot)
		}
	}
	needed := neededBundles(bundles, fulls)
	n := 0
	for _, b := range bundles {
		if needed[b.Key] {
			continue
		}
		switch err := st.Delete(ctx, b.Key); {
		case errors.Is(err, store.ErrLocked):
		case err != nil:
			return n, fmt.Errorf("delete %s: %w", b.Key, err)
		default:
			n++
		}
	}
	return n, nil
}
