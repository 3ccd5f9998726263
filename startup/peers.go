package startup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/etcdkit/etcdkit/tlsfiles"
)

// peerState is what a peer URL of the initial cluster says of its member.
type peerState int

const (
	// peerAbsent: the connection is refused or the name does not
	// resolve: no member runs there.
	peerAbsent peerState = iota
	// peerBootstrapping: the member answers that its cluster has not
	// decided a version yet: it started in a new cluster, waits for the
	// others and holds no data.
	peerBootstrapping
	// peerHasData: the member belongs to a cluster that has run.
	peerHasData
	// peerUnreadable: a TLS server answers the handshake but does not let
	// this member read its state (its CA or its client certificate is not
	// this member's): a process runs there, holding data or not.
	peerUnreadable
	// peerSilent: the member accepted the connection and did not answer
	// in time, or answered something else: a member may run there.
	peerSilent
)

type peerAnswer struct {
	url   string
	state peerState
	why   string
}

// absent says whether a dial's error is positive evidence that nothing
// listens there: refused, unreachable or a name that does not resolve. A
// timeout is not: a stopped process, a member without quorum and a slow
// machine all look like one.
func absent(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || (errors.As(err, &dns) && dns.IsNotFound)
}

// answeredTLS says whether a request failed on what a TLS server said in
// the handshake: its certificate, or an alert refusing this client's.
func answeredTLS(err error) bool {
	var (
		op       *net.OpError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
	)
	return (errors.As(err, &op) && op.Op == "remote error") || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verify)
}

// askPeer asks a peer URL's /version, which etcd serves on the peer port
// before its client port serves anything: a member starting in a new
// cluster answers there that the cluster version is not decided, one
// that holds a cluster's data names the version.
func askPeer(ctx context.Context, peerURL string, files *tlsfiles.Client, timeout time.Duration) peerAnswer {
	a := peerAnswer{url: peerURL, state: peerSilent}
	u, err := url.Parse(peerURL)
	if err != nil {
		a.why = err.Error()
		return a
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		if absent(err) {
			a.state = peerAbsent
		}
		a.why = err.Error()
		return a
	}
	_ = conn.Close()
	tr := &http.Transport{}
	if u.Scheme == "https" {
		tr = files.Transport(timeout)
	}
	tr.DisableKeepAlives = true
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(peerURL, "/")+"/version", nil)
	if err != nil {
		a.why = err.Error()
		return a
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		if answeredTLS(err) {
			a.state = peerUnreadable
		}
		if explained := files.Explain(err); explained != nil {
			err = explained
		}
		a.why = err.Error()
		return a
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	switch {
	case err != nil || resp.StatusCode != http.StatusOK || v.Cluster == "":
		a.why = fmt.Sprintf("/version answered %s %q", resp.Status, b)
	case v.Cluster == "not_decided":
		a.state = peerBootstrapping
	default:
		a.state, a.why = peerHasData, "it holds the data of a cluster at version "+v.Cluster
	}
	return a
}
