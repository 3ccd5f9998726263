package etcdbr

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/tlsfiles"
)

// DefaultEtcdConf is where etcd-druid mounts the members' etcd
// configuration; ETCD_CONF names another file.
const DefaultEtcdConf = "/var/etcd/config/etcd.conf.yaml"

// EtcdConf is the etcd configuration etcd-druid writes once for all the
// members of a cluster: etcd's own keys, plus member-name-prefix and the
// advertise URLs as maps from member name to URLs.
type EtcdConf struct {
	path string
	raw  map[string]any
	file bool
	// Name is the configuration's own name: the member's, in a
	// configuration written for one member (etcd-druid's names none that
	// matters: its members are named after their pods).
	Name string
	// NamePrefix is member-name-prefix: a member is named
	// "<prefix>-<pod name>", or after its pod without one.
	NamePrefix     string
	InitialCluster string
	Token          string
	// State is initial-cluster-state as written ("new" when absent).
	State string
	// DataDir is data-dir as written; WALDir wal-dir, "" when the WAL is
	// the data dir's.
	DataDir, WALDir string
	// PeerURLs and ClientURLs map member names to their advertised URLs.
	PeerURLs, ClientURLs map[string][]string
	// PeerTLS is peer-transport-security's CA, certificate and key: with
	// them a start-up reads what the other members' peer ports hold.
	// etcd-druid mounts them in the etcd container only; files absent
	// here are skipped for the client's.
	PeerTLS tlsfiles.Files
}

// File says whether the configuration came from a file (ETCD_CONF),
// not from a server's flags.
func (c *EtcdConf) File() bool { return c.file }

// LoadEtcdConf reads the configuration at path.
func LoadEtcdConf(path string) (*EtcdConf, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("etcd config %s: %w (set ETCD_CONF to the file etcd-druid mounts)", path, err)
	}
	raw := map[string]any{}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", path, err)
	}
	c, err := EtcdConfOf(path, raw)
	if c != nil {
		c.file = true
	}
	return c, err
}

// EtcdConfOf reads a configuration already parsed; source names it in
// errors.
func EtcdConfOf(source string, raw map[string]any) (*EtcdConf, error) {
	c := &EtcdConf{path: source, raw: raw}
	var err error
	str := func(key string) string {
		s, _ := c.raw[key].(string)
		return s
	}
	c.Name = str("name")
	c.NamePrefix, c.InitialCluster, c.Token, c.State, c.DataDir, c.WALDir = str("member-name-prefix"), str("initial-cluster"),
		str("initial-cluster-token"), str("initial-cluster-state"), str("data-dir"), str("wal-dir")
	if c.State == "" {
		c.State = "new"
	}
	if c.PeerURLs, err = c.urls("initial-advertise-peer-urls"); err != nil {
		return nil, err
	}
	if c.ClientURLs, err = c.urls("advertise-client-urls"); err != nil {
		return nil, err
	}
	if c.InitialCluster == "" {
		return nil, fmt.Errorf("etcd config %s: initial-cluster is not set", source)
	}
	if peer, ok := c.raw["peer-transport-security"].(map[string]any); ok {
		str := func(key string) string {
			s, _ := peer[key].(string)
			return s
		}
		auto, _ := peer["auto-tls"].(bool)
		c.PeerTLS = tlsfiles.Files{CA: str("trusted-ca-file"), Cert: str("cert-file"), Key: str("key-file"), InsecureSkipVerify: auto,
			Names: tlsfiles.Names{CA: "peer-transport-security: trusted-ca-file", Cert: "peer-transport-security: cert-file", Key: "peer-transport-security: key-file"}}
	}
	return c, nil
}

// urls reads an advertise key: a map of member name to URLs as etcd-druid
// writes it, or one comma-separated string every member shares (a
// configuration written by hand for a single member).
func (c *EtcdConf) urls(key string) (map[string][]string, error) {
	out := map[string][]string{}
	switch v := c.raw[key].(type) {
	case nil:
		return out, nil
	case string:
		out[""] = splitURLs(v)
	case map[string]any:
		for name, u := range v {
			switch u := u.(type) {
			case string:
				out[name] = splitURLs(u)
			case []any:
				for _, s := range u {
					str, ok := s.(string)
					if !ok {
						return nil, fmt.Errorf("etcd config %s: %s of %s: %v is not a URL", c.path, key, name, s)
					}
					out[name] = append(out[name], str)
				}
			default:
				return nil, fmt.Errorf("etcd config %s: %s of %s: a list of URLs, not %T", c.path, key, name, u)
			}
		}
	default:
		return nil, fmt.Errorf("etcd config %s: %s: a map of member name to URLs, not %T", c.path, key, v)
	}
	for name, us := range out {
		for _, u := range us {
			if p, err := url.Parse(u); err != nil || p.Host == "" {
				return nil, fmt.Errorf("etcd config %s: %s of %q: %q is not a URL", c.path, key, name, u)
			}
		}
	}
	return out, nil
}

func splitURLs(s string) []string {
	var out []string
	for u := range strings.SplitSeq(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// MemberName is the name of the member in pod.
func (c *EtcdConf) MemberName(pod string) string {
	if c.NamePrefix != "" {
		return c.NamePrefix + "-" + pod
	}
	return pod
}

// Pod is the pod whose member the configuration describes: pod, or Name
// when the initial cluster lists it and not pod's member (a configuration
// written for one member, as a static pod's, whose pod is named otherwise).
func (c *EtcdConf) Pod(pod string) string {
	listed := func(name string) bool {
		return slices.ContainsFunc(strings.Split(c.InitialCluster, ","), func(m string) bool { return strings.HasPrefix(m, name+"=") })
	}
	if c.NamePrefix == "" && c.Name != "" && !listed(c.MemberName(pod)) && listed(c.Name) {
		return c.Name
	}
	return pod
}

// Member is one member's name and advertised URLs.
type Member struct {
	Name                 string
	PeerURLs, ClientURLs []string
}

// Member returns the member in pod, as the configuration advertises it.
func (c *EtcdConf) Member(pod string) (Member, error) {
	if pod == "" {
		return Member{}, errors.New("POD_NAME is not set: it names this member (etcd-druid sets it from the pod's name)")
	}
	m := Member{Name: c.MemberName(pod)}
	m.PeerURLs, m.ClientURLs = c.lookup(c.PeerURLs, m.Name), c.lookup(c.ClientURLs, m.Name)
	if len(m.PeerURLs) == 0 {
		return m, fmt.Errorf("etcd config %s: initial-advertise-peer-urls has no URLs for member %q", c.path, m.Name)
	}
	if len(m.ClientURLs) == 0 {
		return m, fmt.Errorf("etcd config %s: advertise-client-urls has no URLs for member %q", c.path, m.Name)
	}
	return m, nil
}

func (c *EtcdConf) lookup(urls map[string][]string, name string) []string {
	if u, ok := urls[name]; ok {
		return u
	}
	return urls[""]
}

// OtherClientURLs are the advertised client URLs of every member but
// name, in a stable order.
func (c *EtcdConf) OtherClientURLs(name string) []string {
	var out []string
	for n, us := range c.ClientURLs {
		if n != name && n != "" {
			out = append(out, us...)
		}
	}
	slices.Sort(out)
	return out
}

// Render is the configuration member m starts etcd with: the shared one
// with its name, its own advertise URLs, and the initial cluster and state
// given. Keys come out sorted, as etcd-backup-restore writes them.
func (c *EtcdConf) Render(m Member, initialCluster, state string) ([]byte, error) {
	out := make(map[string]any, len(c.raw)+2)
	for k, v := range c.raw {
		out[k] = v
	}
	out["name"] = m.Name
	out["initial-advertise-peer-urls"] = strings.Join(m.PeerURLs, ",")
	out["advertise-client-urls"] = strings.Join(m.ClientURLs, ",")
	out["initial-cluster"] = initialCluster
	out["initial-cluster-state"] = state
	return yaml.Marshal(out)
}

// ClusterSize is the number of members the initial cluster names.
func ClusterSize(initialCluster string) int {
	names := map[string]bool{}
	for part := range strings.SplitSeq(initialCluster, ",") {
		if name, _, ok := strings.Cut(strings.TrimSpace(part), "="); ok {
			names[name] = true
		}
	}
	return len(names)
}
