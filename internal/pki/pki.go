package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is an authority made for one test run.
type CA struct {
	// File is the CA's certificate as PEM: the bundle clients and servers
	// trust.
	File string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

// Leaf is a certificate the CA issued, and its files.
type Leaf struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
}

// LeafOptions describe a certificate. The zero value is a client and
// server certificate for 127.0.0.1 and localhost, valid for a day.
type LeafOptions struct {
	// CommonName is the subject's; etcd takes it as the user name of a
	// client that sends no token.
	CommonName string
	// Hosts are the DNS names and IP addresses it is for; nil: 127.0.0.1
	// and localhost.
	Hosts []string
	// ServerOnly and ClientOnly restrict its extended key usage.
	ServerOnly, ClientOnly bool
	// NotBefore and NotAfter; zero: an hour ago and a day from now.
	NotBefore, NotAfter time.Time
}

var serial atomic.Int64

// NewCA makes a CA whose files go into dir, or fails the test.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	ca, err := MakeCA(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Issue makes a certificate and key signed by the CA, written to
// <dir>/<name>.pem and <dir>/<name>-key.pem, or fails the test.
func (ca *CA) Issue(t testing.TB, name string, o LeafOptions) Leaf {
	t.Helper()
	l, err := ca.Make(name, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// MakeCA makes a CA whose files go into dir.
func MakeCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{File: filepath.Join(dir, name+".pem"), cert: cert, key: key, dir: dir}
	return ca, writePEM(ca.File, "CERTIFICATE", der)
}

// Make makes a certificate and key signed by the CA, written to
// <dir>/<name>.pem and <dir>/<name>-key.pem.
func (ca *CA) Make(name string, o LeafOptions) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, err
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if o.Hosts == nil {
		o.Hosts = []string{"127.0.0.1", "localhost"}
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	switch {
	case o.ServerOnly:
		usage = usage[:1]
	case o.ClientOnly:
		usage = usage[1:]
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: o.CommonName},
		NotBefore: o.NotBefore, NotAfter: o.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Leaf{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Leaf{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	l := Leaf{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"), Cert: cert}
	if err := writePEM(l.CertFile, "CERTIFICATE", der); err != nil {
		return l, err
	}
	return l, writePEM(l.KeyFile, "PRIVATE KEY", keyDER)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// Install copies the certificate and key to the paths a process reads,
// each replaced whole (written beside, then renamed over), as a Secret
// volume's update does: a reader never sees half a file.
func (l Leaf) Install(cert, key string) error {
	for src, dst := range map[string]string{l.CertFile: cert, l.KeyFile: key} {
		if err := replace(dst, src); err != nil {
			return err
		}
	}
	return nil
}

// Bundle writes the CAs' certificates into one file, replaced whole.
func Bundle(path string, cas ...*CA) error {
	var b []byte
	for _, ca := range cas {
		pem, err := os.ReadFile(ca.File)
		if err != nil {
			return err
		}
		b = append(b, pem...)
	}
	return replaceWith(path, b)
}

// replace puts src's content at dst, replaced whole.
func replace(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return replaceWith(dst, b)
}

func replaceWith(path string, b []byte) error {
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		return err
	}
	return os.Rename(path+".new", path)
}
