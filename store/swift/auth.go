package swift

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/objectstorage/v1/swauth"

	"github.com/etcdkit/etcdkit/internal/reload"
	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/internal/credfile"
	"github.com/etcdkit/etcdkit/store/internal/xfer"
)

// Credentials are an OpenStack user's, by etcd-backup-restore's names.
type Credentials struct {
	// AuthURL is Keystone's (https://keystone.example:5000/v3), or a
	// Swift proxy's own /auth/v1.0 for tempauth and swauth.
	AuthURL string
	// DomainName is the user's and the project's domain.
	DomainName string
	// TenantName is the project the token is scoped to (password only: an
	// application credential has its own).
	TenantName string
	// Region picks the object-store endpoint of the catalog; "" takes the
	// first.
	Region   string
	Username string
	Password string
	// An application credential, by ID or by name (with Username and
	// DomainName), and its secret.
	ApplicationCredentialID     string
	ApplicationCredentialName   string
	ApplicationCredentialSecret string
}

// fromFields reads etcd-backup-restore's credential fields.
func fromFields(f credfile.Fields) Credentials {
	return Credentials{
		AuthURL:                     f["authURL"],
		DomainName:                  f["domainName"],
		TenantName:                  f["tenantName"],
		Region:                      f["region"],
		Username:                    f["username"],
		Password:                    f["password"],
		ApplicationCredentialID:     f["applicationCredentialID"],
		ApplicationCredentialName:   f["applicationCredentialName"],
		ApplicationCredentialSecret: f["applicationCredentialSecret"],
	}
}

// fromEnv reads the OS_* variables of OpenStack's clients (with the
// prefix etcd-backup-restore gives a copy's source: SOURCE_OS_AUTH_URL).
func fromEnv(prefix string) Credentials {
	get := func(names ...string) string {
		for _, n := range names {
			if v := os.Getenv(prefix + n); v != "" {
				return v
			}
		}
		return ""
	}
	return Credentials{
		AuthURL:                     get("OS_AUTH_URL"),
		DomainName:                  get("OS_USER_DOMAIN_NAME", "OS_DOMAIN_NAME", "OS_PROJECT_DOMAIN_NAME"),
		TenantName:                  get("OS_PROJECT_NAME", "OS_TENANT_NAME"),
		Region:                      get("OS_REGION_NAME"),
		Username:                    get("OS_USERNAME"),
		Password:                    get("OS_PASSWORD"),
		ApplicationCredentialID:     get("OS_APPLICATION_CREDENTIAL_ID"),
		ApplicationCredentialName:   get("OS_APPLICATION_CREDENTIAL_NAME"),
		ApplicationCredentialSecret: get("OS_APPLICATION_CREDENTIAL_SECRET"),
	}
}

// check says what is missing, by the names of the credential files.
func (c Credentials) check() error {
	var missing []string
	need := func(v, name string) {
		if v == "" {
			missing = append(missing, name)
		}
	}
	need(c.AuthURL, "authURL")
	switch {
	case c.ApplicationCredentialSecret != "":
		if c.ApplicationCredentialID == "" {
			need(c.ApplicationCredentialName, "applicationCredentialID or applicationCredentialName")
			need(c.Username, "username")
			need(c.DomainName, "domainName")
		}
	case swauthURL(c.AuthURL):
		need(c.Username, "username")
		need(c.Password, "password")
	default:
		need(c.Username, "username")
		need(c.Password, "password (or applicationCredentialSecret)")
		need(c.DomainName, "domainName")
		need(c.TenantName, "tenantName")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the Swift credentials lack %s", store.ErrAccessDenied, strings.Join(missing, ", "))
	}
	return nil
}

// swauthURL: Swift's own authentication, as python-swiftclient tells it.
func swauthURL(u string) bool {
	u = strings.TrimSuffix(u, "/")
	return strings.HasSuffix(u, "/auth/v1.0") || strings.HasSuffix(u, "/auth/v1")
}

// authenticator holds the client of the current credentials; it
// authenticates again when the credential files change.
type authenticator struct {
	static    *Credentials
	files     *reload.File[credfile.Fields]
	region    string // OS_REGION_NAME, over a file's region
	from      string // where the credentials came from, for messages
	transport http.RoundTripper
	log       *slog.Logger

	mu     sync.Mutex
	creds  Credentials
	client *gophercloud.ServiceClient
}

func newAuthenticator(cfg Credentials, opts store.Options, rt http.RoundTripper) (*authenticator, error) {
	a := &authenticator{transport: rt, log: opts.Logger, region: os.Getenv(opts.EnvPrefix + "OS_REGION_NAME")}
	if cfg.AuthURL != "" {
		a.static, a.from = &cfg, "the configured credentials"
		return a, nil
	}
	w, from, err := credfile.Watch(opts.Logger, opts.EnvPrefix+"OPENSTACK_APPLICATION_CREDENTIALS_JSON", opts.EnvPrefix+"OPENSTACK_APPLICATION_CREDENTIALS")
	if err != nil {
		return nil, err
	}
	if w != nil {
		a.files, a.from = w, from
		return a, nil
	}
	env := fromEnv(opts.EnvPrefix)
	if env.AuthURL == "" {
		return nil, fmt.Errorf("%w: no Swift credentials: set %sOPENSTACK_APPLICATION_CREDENTIALS to a directory of authURL, domainName, tenantName, username and password (or application credential) files, or the %sOS_* variables of OpenStack's clients",
			store.ErrAccessDenied, opts.EnvPrefix, opts.EnvPrefix)
	}
	a.static, a.from = &env, "the "+opts.EnvPrefix+"OS_* variables"
	return a, nil
}

// current returns the credentials as they are now.
func (a *authenticator) current() (Credentials, error) {
	var c Credentials
	if a.static != nil {
		c = *a.static
	} else {
		f, err := a.files.Get()
		if err != nil {
			return c, fmt.Errorf("%w: %s: %w", store.ErrAccessDenied, a.from, err)
		}
		c = fromFields(f)
	}
	if a.region != "" {
		c.Region = a.region
	}
	if err := c.check(); err != nil {
		return c, fmt.Errorf("%s: %w", a.from, err)
	}
	return c, nil
}

// service returns the object-store client, authenticating first when
// there is none or the credentials changed. Calls in flight keep the
// client they had.
func (a *authenticator) service(ctx context.Context) (*gophercloud.ServiceClient, error) {
	c, err := a.current()
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client != nil && c == a.creds {
		return a.client, nil
	}
	sc, err := connect(ctx, c, a.transport)
	if err != nil {
		if gophercloud.ResponseCodeIs(err, http.StatusUnauthorized) || gophercloud.ResponseCodeIs(err, http.StatusForbidden) {
			return nil, fmt.Errorf("%w: %s at %s refused the credentials of %s: %w", store.ErrAccessDenied, authKind(c), c.AuthURL, a.from, err)
		}
		return nil, fmt.Errorf("authenticate at %s (%s): %w", c.AuthURL, authKind(c), err)
	}
	if a.client != nil {
		a.log.Info("the Swift credentials changed on disk: authenticated with the new ones", "from", a.from)
	}
	a.client, a.creds = sc, c
	return sc, nil
}

func authKind(c Credentials) string {
	switch {
	case swauthURL(c.AuthURL):
		return "Swift's auth"
	case c.ApplicationCredentialSecret != "":
		return "Keystone, application credential"
	}
	return "Keystone, password"
}

// connect authenticates c and finds the object store.
func connect(ctx context.Context, c Credentials, rt http.RoundTripper) (*gophercloud.ServiceClient, error) {
	endpoint := c.AuthURL
	if swauthURL(endpoint) {
		// The SDK asks <base>/auth/v1.0 itself.
		endpoint = strings.TrimSuffix(endpoint, "/")
		endpoint = endpoint[:strings.LastIndex(endpoint, "/auth/")+1]
	}
	newClient := func() (*gophercloud.ProviderClient, error) {
		pc, err := openstack.NewClient(endpoint)
		if err != nil {
			return nil, fmt.Errorf("%w: authURL %q: %w", store.ErrBadURL, c.AuthURL, err)
		}
		pc.HTTPClient = http.Client{Transport: rt}
		return pc, nil
	}
	pc, err := newClient()
	if err != nil {
		return nil, err
	}
	if swauthURL(c.AuthURL) {
		opts := swauth.AuthOpts{User: c.Username, Key: c.Password}
		sc, err := swauth.NewObjectStorageV1(ctx, pc, opts)
		if err != nil {
			return nil, err
		}
		// Swift's tokens expire (tempauth: a day); a 401 fetches another
		// through a client of its own, which never re-authenticates.
		authPC, err := newClient()
		if err != nil {
			return nil, err
		}
		pc.ReauthFunc = func(ctx context.Context) error {
			r, err := swauth.Auth(ctx, authPC, opts).Extract()
			if err != nil {
				return err
			}
			pc.SetToken(r.Token)
			return nil
		}
		return sc, nil
	}
	ao := gophercloud.AuthOptions{IdentityEndpoint: c.AuthURL, AllowReauth: true}
	if c.ApplicationCredentialSecret != "" {
		ao.ApplicationCredentialID = c.ApplicationCredentialID
		ao.ApplicationCredentialName = c.ApplicationCredentialName
		ao.ApplicationCredentialSecret = c.ApplicationCredentialSecret
		if c.ApplicationCredentialID == "" {
			ao.Username, ao.DomainName = c.Username, c.DomainName
		}
	} else {
		ao.Username, ao.Password = c.Username, c.Password
		ao.DomainName, ao.TenantName = c.DomainName, c.TenantName
	}
	if err := openstack.Authenticate(ctx, pc, ao); err != nil {
		return nil, err
	}
	sc, err := openstack.NewObjectStorageV1(pc, gophercloud.EndpointOpts{Region: c.Region})
	if err != nil {
		if c.Region != "" {
			return nil, fmt.Errorf("no object-store endpoint in region %q of the catalog (the region file or OS_REGION_NAME): %w", c.Region, err)
		}
		return nil, fmt.Errorf("no object-store endpoint in the catalog: %w", err)
	}
	return sc, nil
}

// retrying retries a request that failed on the way or got an answer worth
// another try (a timeout, throttling, a server's failure), when its body
// can be sent again. Swift's SDK retries nothing of that itself.
type retrying struct {
	base http.RoundTripper
	log  *slog.Logger
}

const attempts = 5

func (r retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := r.base.RoundTrip(req)
		ctx := req.Context()
		if attempt == attempts || !retriable(resp, err) || ctx.Err() != nil || req.Body != nil && req.GetBody == nil {
			return resp, err
		}
		var why string
		if err != nil {
			why = err.Error()
		} else {
			why = resp.Status
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		r.log.Debug("swift request failed, retrying", "method", req.Method, "url", req.URL.Redacted(), "attempt", attempt, "why", why)
		t := time.NewTimer(xfer.Backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		next := req.Clone(ctx)
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			next.Body = body
		}
		req = next
	}
}

func retriable(resp *http.Response, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
