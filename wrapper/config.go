package wrapper

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/sidecar/etcdbr/etcdbrapi"
)

// removed are keys of etcd's configuration file that etcd 3.7 no longer
// reads, and silently ignores: a member configured with them runs without
// what the operator asked for. Each names its replacement.
var removed = map[string]string{
	"experimental-initial-corrupt-check":                "feature-gates: InitialCorruptCheck=true",
	"experimental-compact-hash-check-enabled":           "feature-gates: CompactHashCheck=true",
	"experimental-enable-lease-checkpoint":              "feature-gates: LeaseCheckpoint=true",
	"experimental-enable-lease-checkpoint-persist":      "feature-gates: LeaseCheckpointPersist=true",
	"experimental-txn-mode-write-with-shared-buffer":    "feature-gates: TxnModeWriteWithSharedBuffer=true",
	"experimental-stop-grpc-service-on-defrag":          "feature-gates: StopGRPCServiceOnDefrag=true",
	"experimental-set-member-localaddr":                 "feature-gates: SetMemberLocalAddr=true",
	"experimental-corrupt-check-time":                   "corrupt-check-time",
	"experimental-compact-hash-check-time":              "compact-hash-check-time",
	"experimental-compaction-batch-limit":               "compaction-batch-limit",
	"experimental-compaction-sleep-interval":            "compaction-sleep-interval",
	"experimental-watch-progress-notify-interval":       "watch-progress-notify-interval",
	"experimental-warning-apply-duration":               "warning-apply-duration",
	"experimental-warning-unary-request-duration":       "warning-unary-request-duration",
	"experimental-bootstrap-defrag-threshold-megabytes": "bootstrap-defrag-threshold-megabytes",
	"experimental-memory-mlock":                         "memory-mlock",
	"experimental-snapshot-catchup-entries":             "snapshot-catchup-entries",
	"experimental-downgrade-check-time":                 "downgrade-check-time",
	"experimental-max-learners":                         "max-learners",
	"experimental-enable-distributed-tracing":           "enable-distributed-tracing",
	"experimental-distributed-tracing-address":          "distributed-tracing-address",
	"experimental-distributed-tracing-service-name":     "distributed-tracing-service-name",
	"experimental-distributed-tracing-instance-id":      "distributed-tracing-instance-id",
	"experimental-distributed-tracing-sampling-rate":    "distributed-tracing-sampling-rate",
	"experimental-peer-skip-client-san-verification":    "",
	"experimental-enable-v2v3":                          "",
	"enable-v2":                                         "",
	"experimental-backend-bbolt-freelist-type":          "backend-bbolt-freelist-type",
}

// urlKeys are the keys etcd parses as URL lists, and exits the process on
// when one does not parse, instead of returning an error.
var urlKeys = []string{"listen-peer-urls", "listen-client-urls", "listen-client-http-urls",
	"initial-advertise-peer-urls", "advertise-client-urls", "listen-metrics-urls"}

// LoadConfig reads etcd's YAML configuration file strictly: a key etcd
// does not read (unknown, or removed in 3.7) and a URL that does not parse
// are errors naming the key, and the replacement when there is one.
//
// ${VAR} in the file is replaced by the environment variable VAR, so one
// file serves every pod of a StatefulSet (${POD_NAME}); an unset variable
// is an error.
func LoadConfig(path string) (*embed.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("etcd config: %w", err)
	}
	if b, err = expandEnv(b); err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", path, err)
	}
	return loadConfig(path, b)
}

// druidKeys are keys etcd-druid writes into every member's configuration
// for its own tools, with why LoadServedConfig drops them.
var druidKeys = map[string]string{
	"member-name-prefix":              "etcd-druid's prefix of member names, read by the sidecar",
	"next-cluster-version-compatible": "for etcd 3.5 and 3.6 members, which etcd 3.7 no longer reads",
}

// LoadServedConfig reads a configuration a sidecar served (an
// etcd-backup-restore sidecar's /config) as strictly as LoadConfig, but
// for the keys etcd-druid writes for its own tools, which are dropped and
// logged. Nothing in it is expanded.
func LoadServedConfig(b []byte, source string, log *slog.Logger) (*embed.Config, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", source, err)
	}
	for _, k := range sortedKeys(raw) {
		if why, ok := druidKeys[k]; ok {
			log.Info("wrapper: the served etcd config's key is dropped", "key", k, "value", raw[k], "why", why)
			delete(raw, k)
		}
	}
	b, err := yaml.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", source, err)
	}
	return loadConfig(source, b)
}

// loadConfig checks the configuration b, from path, and loads it.
func loadConfig(path string, b []byte) (*embed.Config, error) {
	expanded, err := os.CreateTemp("", "etcd-config-*.yaml")
	if err != nil {
		return nil, fmt.Errorf("etcd config: %w", err)
	}
	defer func() { _ = os.Remove(expanded.Name()) }()
	_, err = expanded.Write(b)
	if cerr := expanded.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("etcd config: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", path, err)
	}
	known := knownKeys()
	var problems []string
	for _, k := range sortedKeys(raw) {
		if repl, ok := removed[k]; ok {
			msg := fmt.Sprintf("%q was removed in etcd 3.7, which ignores it without a word", k)
			if repl != "" {
				msg += fmt.Sprintf("; use %q instead", repl)
			}
			problems = append(problems, msg)
			continue
		}
		if !known[k] {
			problems = append(problems, fmt.Sprintf("%q is not a key of etcd's configuration file", k))
		}
	}
	for _, k := range urlKeys {
		if v, ok := raw[k].(string); ok && v != "" {
			if _, err := types.NewURLs(strings.Split(v, ",")); err != nil {
				problems = append(problems, fmt.Sprintf("%s %q: %v", k, v, err))
			}
		}
	}
	// etcd would make one in the working directory ("<name>.etcd"): a
	// data dir the wrapper validates, restores and guards must be named.
	if v, ok := raw["data-dir"].(string); !ok || strings.TrimSpace(v) == "" {
		problems = append(problems, `"data-dir" is not set: name the member's data dir (etcd would otherwise use <name>.etcd in the working directory)`)
	}
	if v, ok := raw["initial-cluster"].(string); ok && v != "" {
		if _, err := types.NewURLsMap(v); err != nil {
			problems = append(problems, fmt.Sprintf("initial-cluster %q: %v", v, err))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("etcd config %s: %s", path, strings.Join(problems, "; "))
	}
	// etcd reads a file: it gets the expanded one.
	cfg, err := embed.ConfigFromFile(expanded.Name())
	if err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", path, err)
	}
	return cfg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces ${VAR} with the environment's VAR, outside YAML
// comments: a commented-out line must not need its variables set.
func expandEnv(b []byte) ([]byte, error) {
	var missing []string
	lines := bytes.SplitAfter(b, []byte("\n"))
	for i, line := range lines {
		at := commentStart(line)
		expanded := envRef.ReplaceAllFunc(line[:at], func(ref []byte) []byte {
			name := string(envRef.FindSubmatch(ref)[1])
			v, ok := os.LookupEnv(name)
			if !ok && !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			return []byte(v)
		})
		lines[i] = append(expanded, line[at:]...)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("environment variables not set: %s", strings.Join(missing, ", "))
	}
	return bytes.Join(lines, nil), nil
}

// commentStart is where a YAML comment starts in line (len(line) when it
// has none): a # at the start or after a blank, outside a quoted scalar.
func commentStart(line []byte) int {
	var quote byte
	for i, c := range line {
		after := i == 0 || bytes.IndexByte([]byte(" \t[{,:"), line[i-1]) >= 0
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case (c == '\'' || c == '"') && after:
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return i
		}
	}
	return len(line)
}

// knownKeys are the keys etcd's configuration file takes: the JSON names
// of embed.Config's fields and of the file-only options.
func knownKeys() map[string]bool {
	keys := map[string]bool{}
	collect(reflect.TypeFor[embed.Config](), keys)
	for _, k := range append(slices.Clone(urlKeys), "cors", "host-whitelist", "client-transport-security", "peer-transport-security", "feature-gates") {
		keys[k] = true
	}
	return keys
}

func collect(t reflect.Type, keys map[string]bool) {
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-":
		case tag != "":
			keys[tag] = true
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			collect(f.Type, keys)
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ServedConfig is the configuration a sidecar that speaks
// etcd-backup-restore's protocol serves for its member, asked until the
// sidecar answers, for at most wait, and read by LoadServedConfig.
func ServedConfig(ctx context.Context, c *etcdbrapi.Client, wait time.Duration, log *slog.Logger) (*embed.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		b, err := c.Config(ctx)
		if err == nil {
			return LoadServedConfig(b, c.Base+"/config", log)
		}
		log.Info("wrapper: waiting for the sidecar's etcd config", "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wrapper: the sidecar's etcd config: %w (last: %w)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}
