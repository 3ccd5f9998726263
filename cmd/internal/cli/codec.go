package cli

import (
	"fmt"
	"os"
	"strings"

	"filippo.io/age"
	"github.com/spf13/pflag"

	"github.com/etcdkit/etcdkit/snapshot"
)

// Codec is the flags that say how snapshots are encoded and read.
type Codec struct {
	Compression    string
	Recipients     []string
	IdentityFile   string
	PassphraseFile string
}

// Flags adds the codec flags to fs: how new snapshots are written, and
// how snapshots are read.
func (c *Codec) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Compression, "compression", "none", "compression of new snapshots: none, gzip or zstd")
	fs.StringSliceVar(&c.Recipients, "encrypt-to", nil, "age X25519 public key (age1…) new snapshots are encrypted to; repeatable")
	fs.StringVar(&c.IdentityFile, "identity-file", "", "file of age identities (AGE-SECRET-KEY-1…) that decrypt snapshots")
	fs.StringVar(&c.PassphraseFile, "passphrase-file", "", "file holding a passphrase that encrypts new snapshots and decrypts old ones")
}

// ReadFlags adds only the flags that read snapshots, for a binary that
// writes none (the wrapper restores, never snapshots).
func (c *Codec) ReadFlags(fs *pflag.FlagSet) {
	c.Compression = "none"
	fs.StringVar(&c.IdentityFile, "identity-file", "", "file of age identities (AGE-SECRET-KEY-1…) that decrypt snapshots")
	fs.StringVar(&c.PassphraseFile, "passphrase-file", "", "file holding the passphrase that decrypts snapshots")
}

// Codec builds the snapshot codec.
func (c *Codec) Codec() (snapshot.Codec, error) {
	var out snapshot.Codec
	var err error
	if out.Compression, err = snapshot.ParseCompression(c.Compression); err != nil {
		return out, fmt.Errorf("--%w", err)
	}
	if err := out.Check(); err != nil {
		return out, fmt.Errorf("--%w", err)
	}
	for _, r := range c.Recipients {
		rec, err := age.ParseX25519Recipient(r)
		if err != nil {
			return out, fmt.Errorf("--encrypt-to %q: %w", r, err)
		}
		out.Recipients = append(out.Recipients, rec)
	}
	if c.IdentityFile != "" {
		f, err := os.Open(c.IdentityFile)
		if err != nil {
			return out, fmt.Errorf("--identity-file: %w", err)
		}
		ids, err := age.ParseIdentities(f)
		_ = f.Close()
		if err != nil {
			return out, fmt.Errorf("--identity-file %s: %w", c.IdentityFile, err)
		}
		out.Identities = append(out.Identities, ids...)
	}
	if c.PassphraseFile != "" {
		b, err := os.ReadFile(c.PassphraseFile)
		if err != nil {
			return out, fmt.Errorf("--passphrase-file: %w", err)
		}
		pass := strings.TrimRight(string(b), "\r\n")
		if len(c.Recipients) > 0 {
			return out, fmt.Errorf("--passphrase-file and --encrypt-to exclude each other: age encrypts to a passphrase alone")
		}
		rec, err := age.NewScryptRecipient(pass)
		if err != nil {
			return out, fmt.Errorf("--passphrase-file: %w", err)
		}
		id, err := age.NewScryptIdentity(pass)
		if err != nil {
			return out, fmt.Errorf("--passphrase-file: %w", err)
		}
		out.Recipients, out.Identities = append(out.Recipients, rec), append(out.Identities, id)
	}
	return out, out.Check()
}
