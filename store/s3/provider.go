package s3

import (
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/etcdkit/etcdkit/store"
	"github.com/etcdkit/etcdkit/store/internal/credfile"
)

// provider is where an S3-compatible service's credentials are, as
// etcd-backup-restore reads them for its storage provider of that name.
type provider struct {
	// jsonEnv and dirEnv name its credential file and directory.
	jsonEnv, dirEnv string
	// names maps its field names to AWS's (accessKeyID, secretAccessKey,
	// endpoint, region, …).
	names map[string]string
	// pathStyle: its buckets are addressed by path.
	pathStyle bool
	// fromEnv reads a provider configured by environment variables alone,
	// into fields of AWS's names.
	fromEnv func(envPrefix string) (credfile.Fields, error)
}

var providers = map[string]provider{
	"":    {jsonEnv: "AWS_APPLICATION_CREDENTIALS_JSON", dirEnv: "AWS_APPLICATION_CREDENTIALS"},
	"ocs": {jsonEnv: "OPENSHIFT_APPLICATION_CREDENTIALS_JSON", dirEnv: "OPENSHIFT_APPLICATION_CREDENTIALS", pathStyle: true},
	"oss": {jsonEnv: "ALICLOUD_APPLICATION_CREDENTIALS_JSON", dirEnv: "ALICLOUD_APPLICATION_CREDENTIALS",
		names: map[string]string{"storageEndpoint": "endpoint", "accessKeySecret": "secretAccessKey"}},
	"ecs": {fromEnv: ecsFromEnv, pathStyle: true},
}

// watch returns the provider's credential fields, under AWS's names, as
// the files hold them at each call (credfile.Watch); nil when there are
// none.
func (p provider) watch(log *slog.Logger, envPrefix string) (func() (credfile.Fields, error), string, error) {
	if p.fromEnv != nil {
		f, err := p.fromEnv(envPrefix)
		return func() (credfile.Fields, error) { return f, nil }, "the " + envPrefix + "ECS_* variables", err
	}
	w, from, err := credfile.Watch(log, envPrefix+p.jsonEnv, envPrefix+p.dirEnv)
	if w == nil || err != nil {
		return nil, from, err
	}
	return func() (credfile.Fields, error) {
		f, err := w.Get()
		if err != nil || len(p.names) == 0 {
			return f, err
		}
		out := maps.Clone(f)
		for theirs, ours := range p.names {
			if v, ok := f[theirs]; ok {
				delete(out, theirs)
				out[ours] = v
			}
		}
		return out, nil
	}, from, nil
}

// ecsFromEnv reads Dell ECS's variables: it has no regions (US-Standard).
func ecsFromEnv(envPrefix string) (credfile.Fields, error) {
	get := func(name string) string { return strings.TrimSpace(os.Getenv(envPrefix + name)) }
	f := credfile.Fields{"endpoint": get("ECS_ENDPOINT"), "accessKeyID": get("ECS_ACCESS_KEY_ID"), "secretAccessKey": get("ECS_SECRET_ACCESS_KEY"),
		"region": "US-Standard", "disableSSL": get("ECS_DISABLE_SSL"), "insecureSkipVerify": get("ECS_INSECURE_SKIP_VERIFY")}
	if f["endpoint"] == "" || f["accessKeyID"] == "" || f["secretAccessKey"] == "" {
		return nil, fmt.Errorf("%w: the ECS provider needs %sECS_ENDPOINT, %sECS_ACCESS_KEY_ID and %sECS_SECRET_ACCESS_KEY", store.ErrAccessDenied, envPrefix, envPrefix, envPrefix)
	}
	return f, nil
}

// withScheme is an endpoint as the SDK takes it: etcd-backup-restore's
// providers give a host, with disableSSL saying http.
func withScheme(endpoint string, fields credfile.Fields) (string, error) {
	if endpoint == "" || strings.Contains(endpoint, "://") {
		return endpoint, nil
	}
	insecure := false
	if v := fields["disableSSL"]; v != "" {
		var err error
		if insecure, err = strconv.ParseBool(v); err != nil {
			return "", fmt.Errorf("disableSSL=%q is not a boolean", v)
		}
	}
	u := url.URL{Scheme: "https", Host: endpoint}
	if insecure {
		u.Scheme = "http"
	}
	return u.String(), nil
}

// sseC is server-side encryption with a customer key (SSE-C), as
// etcd-backup-restore sends it: the key as the credential file gives it and
// the MD5 of those bytes, so a bucket either wrote the other reads.
type sseC struct {
	algorithm, key, keyMD5 *string
}

func sseFromFields(f credfile.Fields) (sseC, error) {
	key, alg := f["sseCustomerKey"], f["sseCustomerAlgorithm"]
	switch {
	case key == "" && alg == "":
		return sseC{}, nil
	case key == "" || alg == "":
		return sseC{}, errors.New("sseCustomerKey and sseCustomerAlgorithm go together (SSE-C): give both, or neither")
	}
	sum := md5.Sum([]byte(key)) //nolint:gosec // S3's SSE-C names the key by its MD5
	md := base64.StdEncoding.EncodeToString(sum[:])
	return sseC{algorithm: &alg, key: &key, keyMD5: &md}, nil
}
