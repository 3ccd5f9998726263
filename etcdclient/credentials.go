package etcdclient

import (
	"context"
	"errors"
	"net"

	grpccreds "google.golang.org/grpc/credentials"

	"github.com/etcdkit/etcdkit/tlsfiles"
)

// credentials are gRPC's TLS credentials made anew for each connection
// from the files as they are on disk then: gRPC's own keep the CA bundle
// they were made with for the client's life.
type credentials struct {
	files *tlsfiles.Client
}

func (c *credentials) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, grpccreds.AuthInfo, error) {
	host, _, err := net.SplitHostPort(authority)
	if err != nil {
		host = authority
	}
	cfg, err := c.files.Config(host)
	if err != nil {
		return nil, nil, err
	}
	// gRPC verifies the authority's host, whatever the configuration
	// names: the server name (Files.ServerName, else the host) goes as
	// the authority.
	return grpccreds.NewTLS(cfg).ClientHandshake(ctx, cfg.ServerName, raw)
}

func (c *credentials) ServerHandshake(net.Conn) (net.Conn, grpccreds.AuthInfo, error) {
	return nil, nil, errors.New("etcdclient: client credentials cannot serve")
}

func (c *credentials) Info() grpccreds.ProtocolInfo {
	return grpccreds.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c *credentials) Clone() grpccreds.TransportCredentials { return &credentials{files: c.files} }

// OverrideServerName is deprecated in gRPC and unused by it; the server
// name comes from Files.ServerName or the endpoint.
func (c *credentials) OverrideServerName(string) error { return nil }
