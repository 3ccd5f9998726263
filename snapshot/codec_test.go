package snapshot

import (
	"bytes"
	stdgzip "compress/gzip"
	"compress/lzw"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/etcdkit/etcdkit/internal/frames"
	"github.com/etcdkit/etcdkit/store"
)

// payload is what etcd streams: content followed by its SHA-256.
func payload(n int) (content, withTrailer []byte) {
	content = make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	// Half random, half repetitive, so compression has work either way.
	_, _ = r.Read(content[:n/2])
	copy(content[n/2:], bytes.Repeat([]byte("etcdkit "), n/16))
	sum := sha256.Sum256(content)
	return content, append(bytes.Clone(content), sum[:]...)
}

type encryption struct {
	name       string
	recipients []age.Recipient
	identities []age.Identity
}

func encryptions(t *testing.T) []encryption {
	x, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	pass, err := age.NewScryptRecipient("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	pass.SetWorkFactor(10) // the default makes each test a second slower
	passID, err := age.NewScryptIdentity("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	return []encryption{
		{name: "plain"},
		{name: "x25519", recipients: []age.Recipient{x.Recipient()}, identities: []age.Identity{x}},
		{name: "passphrase", recipients: []age.Recipient{pass}, identities: []age.Identity{passID}},
	}
}

func writeObject(t *testing.T, st store.Store, c Codec, body []byte) Snapshot {
	t.Helper()
	s := newSnapshot(KindFull, 0, 42, time.Unix(1700000000, 0), c, false)
	n, err := put(context.Background(), st, s.Key, c, bulk, func(w io.Writer) error {
		_, err := w.Write(body)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The size put reports is the stored object's.
	rc, err := st.Get(context.Background(), s.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	if stored, _ := io.Copy(io.Discard, rc); stored != n {
		t.Fatalf("put reports %d bytes, the store holds %d", n, stored)
	}
	s.Size = n
	return s
}

func readObject(st store.Store, s Snapshot, c Codec) ([]byte, error) {
	rc, err := Open(context.Background(), st, s, c)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestCodecsRoundTrip(t *testing.T) {
	content, body := payload(3 << 20)
	for _, comp := range []Compression{None, Gzip, Zstd} {
		for _, enc := range encryptions(t) {
			t.Run(string(comp)+"-"+enc.name, func(t *testing.T) {
				st := store.NewMem()
				c := Codec{Compression: comp, Recipients: enc.recipients, Identities: enc.identities}
				s := writeObject(t, st, c, body)
				if wantSuffix := comp.Suffix(); !strings.Contains(s.Key, wantSuffix) || s.Encrypted != (enc.recipients != nil) {
					t.Fatalf("key %s for %s/%s", s.Key, comp, enc.name)
				}
				parsed, err := Parse(s.Key)
				if err != nil || parsed.Compression != comp || parsed.Encrypted != s.Encrypted {
					t.Fatalf("key %s parses to %+v, %v", s.Key, parsed, err)
				}
				got, err := readObject(st, parsed, Codec{Identities: enc.identities})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, content) {
					t.Fatal("content changed on the way")
				}
			})
		}
	}
}

func TestDamagedObjectsFailNamingTheObject(t *testing.T) {
	_, body := payload(1 << 20)
	encs := encryptions(t)
	other, _ := age.GenerateX25519Identity()
	for _, comp := range []Compression{None, Gzip, Zstd} {
		for _, enc := range encs {
			c := Codec{Compression: comp, Recipients: enc.recipients, Identities: enc.identities}
			damages := map[string]func([]byte) []byte{
				"flipped byte": func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b },
				"flipped last": func(b []byte) []byte { b[len(b)-1] ^= 0x01; return b },
				"truncated":    func(b []byte) []byte { return b[:len(b)-100] },
				"cut to 10":    func(b []byte) []byte { return b[:10] },
			}
			for name, damage := range damages {
				t.Run(string(comp)+"-"+enc.name+"-"+name, func(t *testing.T) {
					st := store.NewMem()
					s := writeObject(t, st, c, body)
					damageObject(t, st, s.Key, damage)
					_, err := readObject(st, s, c)
					if err == nil {
						t.Fatal("damage went unnoticed")
					}
					if !strings.Contains(err.Error(), s.Key) {
						t.Fatalf("error does not name the object: %v", err)
					}
				})
			}
			if enc.identities != nil {
				st := store.NewMem()
				s := writeObject(t, st, c, body)
				if _, err := readObject(st, s, Codec{Identities: []age.Identity{other}}); err == nil || !strings.Contains(err.Error(), s.Key) {
					t.Errorf("%s/%s: wrong key: %v", comp, enc.name, err)
				}
				if _, err := readObject(st, s, Codec{}); err == nil || !strings.Contains(err.Error(), "no identity") {
					t.Errorf("%s/%s: no key: %v", comp, enc.name, err)
				}
			}
		}
	}
}

func damageObject(t *testing.T, st store.Store, key string, damage func([]byte) []byte) {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Objects are written once: damage replaces one as bit rot would.
	if err := st.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), key, bytes.NewReader(damage(b))); err != nil {
		t.Fatal(err)
	}
}

// zlib and LZW objects come from older etcd-backup-restore policies; they
// are read, never written.
func TestReadOnlyCompressions(t *testing.T) {
	content, body := payload(1 << 20)
	for _, tc := range []struct {
		suffix string
		write  func(io.Writer) io.WriteCloser
	}{
		{".zlib", func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) }},
		{".Z", func(w io.Writer) io.WriteCloser { return lzw.NewWriter(w, lzw.LSB, 8) }},
	} {
		var buf bytes.Buffer
		w := tc.write(&buf)
		_, _ = w.Write(body)
		_ = w.Close()
		st := store.NewMem()
		key := "v2/Full-00000000-00000042-1700000000" + tc.suffix
		if err := st.Put(context.Background(), key, &buf); err != nil {
			t.Fatal(err)
		}
		s, err := Parse(key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readObject(st, s, Codec{})
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%s: %v", tc.suffix, err)
		}
		if err := (Codec{Compression: s.Compression}).Check(); err == nil {
			t.Fatalf("%s: writing it should be refused", tc.suffix)
		}
	}
}

func TestVerifierReportsEveryShortObject(t *testing.T) {
	for n := range 40 {
		b := bytes.Repeat([]byte{7}, n)
		_, err := io.ReadAll(newVerifier(bytes.NewReader(b)))
		if n < checksumSize && !errors.Is(err, ErrTruncated) || n >= checksumSize && !errors.Is(err, ErrChecksum) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
}

// Full snapshots are gzipped on every core, one gzip member per block.
// etcd-backup-restore reads them with Go's compress/gzip, which reads a
// multi-member stream whole: the standard library's reader must get the
// exact bytes back, at every size around a block's edge, and see more
// than one member in a large object.
func TestParallelGzipIsStandardGzip(t *testing.T) {
	content, _ := payload(3*compressBlock + 5)
	for _, n := range []int{0, 1, compressBlock - 1, compressBlock, compressBlock + 1, 2 * compressBlock, len(content)} {
		var out bytes.Buffer
		z := newParallelBlocks(&out, gzipBlocks(bulkGzipLevel))
		// Writes of odd sizes, as a stream of etcd's chunks arrives.
		for rest := content[:n]; len(rest) > 0; {
			k := min(len(rest), 1<<16+7)
			if _, err := z.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := stdgzip.NewReader(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, content[:n]) {
			t.Fatalf("%d bytes: compress/gzip read %d bytes back, %v", n, len(got), err)
		}
		// And so must the reader restores use.
		kr, err := gzip.NewReader(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(kr); err != nil || !bytes.Equal(got, content[:n]) {
			t.Fatalf("%d bytes: klauspost/compress/gzip read %d bytes back, %v", n, len(got), err)
		}
		// Members one at a time: a block is one member.
		r, _ = stdgzip.NewReader(bytes.NewReader(out.Bytes()))
		r.Multistream(false)
		first, _ := io.ReadAll(r)
		if want := min(n, compressBlock); len(first) != want {
			t.Fatalf("%d bytes: the first member holds %d bytes, want %d", n, len(first), want)
		}
		// Each member names its length, so a restore splits them without
		// inflating and inflates them on every core.
		members := 0
		if err := frames.Split(bytes.NewReader(out.Bytes()), frames.Gzip, func([]byte) error { members++; return nil }); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if want := max(1, (n+compressBlock-1)/compressBlock); members != want {
			t.Fatalf("%d bytes: split into %d members, want %d", n, members, want)
		}
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after -= len(p); f.after < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// A store that stops taking the stream stops the compression: the error
// reaches the writer, not a silent truncation.
func TestParallelGzipReportsTheWriteError(t *testing.T) {
	content, _ := payload(8 * compressBlock)
	z := newParallelBlocks(&failingWriter{after: compressBlock}, gzipBlocks(bulkGzipLevel))
	var err error
	for rest := content; len(rest) > 0 && err == nil; rest = rest[min(len(rest), 1<<20):] {
		_, err = z.Write(rest[:min(len(rest), 1<<20)])
	}
	if cerr := z.Close(); err == nil {
		err = cerr
	}
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v, want the writer's error", err)
	}
}

// zstd fulls are frames of blocks compressed on every core: the zstd
// reader restores use reads them back whole.
func TestParallelZstdIsOneStream(t *testing.T) {
	content, _ := payload(3*compressBlock + 5)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(bulkZstdLevel))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = enc.Close() }()
	var out bytes.Buffer
	z := newParallelBlocks(&out, zstdBlocks(enc))
	if _, err := z.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	if got, err := io.ReadAll(dec); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read %d bytes back, %v", len(got), err)
	}
	// Each frame's end is found from its block headers, so a restore
	// splits them without decoding and decodes them on every core.
	n := 0
	if err := frames.Split(bytes.NewReader(out.Bytes()), frames.Zstd, func([]byte) error { n++; return nil }); err != nil || n != 4 {
		t.Fatalf("split into %d frames (%v), want 4", n, err)
	}
}
