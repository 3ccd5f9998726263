package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// Error is a TLS handshake that failed for a reason a setting fixes: the
// hint says which.
type Error struct {
	Hint string
	Err  error
}

func (e *Error) Error() string { return e.Hint + " (" + e.Err.Error() + ")" }
func (e *Error) Unwrap() error { return e.Err }

// Explain returns an *Error when err is a handshake of this client that
// failed for a reason one of its settings fixes, and nil otherwise (the
// server is down, the network is, the call timed out).
func (c *Client) Explain(err error) error {
	if err == nil {
		return nil
	}
	f := c.files
	n := f.names()
	explained := func(format string, args ...any) error {
		return &Error{Hint: fmt.Sprintf(format, args...), Err: err}
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		op       *net.OpError
	)
	switch {
	case errors.As(err, &unknown) && f.CA == "":
		return explained("the server's certificate is signed by an authority this machine does not trust: give the CA bundle that signed it with %s", n.CA)
	case errors.As(err, &unknown):
		return explained("the server's certificate is not signed by a CA of %s %s: give the CA bundle that signed it", n.CA, f.CA)
	case errors.As(err, &hostname):
		return explained("the server's certificate is not for %q: dial a name it is for (%s), or set %s to one", hostname.Host, strings.Join(certNames(hostname.Certificate), ", "), n.ServerName)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return explained("the server's certificate has expired or is not valid yet (this machine's time is %s): renew it, or check the clocks", time.Now().UTC().Format(time.RFC3339))
	case errors.As(err, &invalid):
		return explained("the server's certificate is not one a TLS server may use")
	case errors.As(err, &record), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return explained("the server does not speak TLS at this address: use an http:// URL")
	case errors.As(err, &op) && op.Op == "remote error":
		return c.explainRefusal(op.Err.Error(), explained)
	}
	return nil
}

// explainRefusal explains an alert the server sent: it refused this
// client's certificate, or the lack of one.
func (c *Client) explainRefusal(alert string, explained func(string, ...any) error) error {
	f := c.files
	n := f.names()
	leaf := c.Leaf()
	switch {
	case leaf == nil && (strings.Contains(alert, "certificate required") || strings.Contains(alert, "bad certificate")):
		return explained("the server requires a client certificate: give one with %s and %s", n.Cert, n.Key)
	case leaf == nil:
		return explained("the server ended the handshake")
	case strings.Contains(alert, "unknown certificate authority"):
		return explained("the server does not trust the client certificate %s %s (%q, issued by %q): use one signed by a CA the server trusts", n.Cert, f.Cert, leaf.Subject.CommonName, leaf.Issuer.CommonName)
	case strings.Contains(alert, "expired certificate"):
		return explained("the server says the client certificate %s %s (%q) has expired or is not valid yet: renew it, or check the clocks", n.Cert, f.Cert, leaf.Subject.CommonName)
	case len(leaf.ExtKeyUsage) > 0 && !slices.ContainsFunc(leaf.ExtKeyUsage, func(u x509.ExtKeyUsage) bool {
		return u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny
	}):
		return explained("the server refused the client certificate %s %s (%q): it is not for client use (its extended key usage lacks clientAuth)", n.Cert, f.Cert, leaf.Subject.CommonName)
	}
	return explained("the server refused the client certificate %s %s (%q)", n.Cert, f.Cert, leaf.Subject.CommonName)
}

// certNames lists the names a certificate is for.
func certNames(cert *x509.Certificate) []string {
	if cert == nil {
		return nil
	}
	names := slices.Clone(cert.DNSNames)
	for _, ip := range cert.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 && cert.Subject.CommonName != "" {
		names = append(names, cert.Subject.CommonName+" (in its subject only, which Go ignores)")
	}
	return names
}
