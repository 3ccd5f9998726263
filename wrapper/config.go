package wrapper

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcdkit/etcdversion"
	"github.com/etcdkit/etcdkit/restore"
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
	"experimental-snapshot-catch-up-entries":            "snapshot-catchup-entries",
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

// moduleRelease is the etcd release this module embeds.
var moduleRelease = restore.Module

// urlKeys are the keys etcd parses as URL lists, and exits the process on
// when one does not parse, instead of returning an error.
var urlKeys = []string{"listen-peer-urls", "listen-client-urls", "listen-client-http-urls",
	"initial-advertise-peer-urls", "advertise-client-urls", "listen-metrics-urls"}

// File is etcd's configuration file as read for the release that reads
// it: Keys as the file gives them (${VAR} expanded; etcd-druid's own keys
// dropped from a served one), what a Process gives the etcd it runs; and
// Config, the member's settings as this module's etcd reads them, which
// the start-up and the probes use (the name, data dir, URLs, initial
// cluster and TLS files, which every release reads alike).
type File struct {
	Release etcdversion.Version
	Keys    map[string]any
	Config  *embed.Config
}

// LoadConfig reads etcd's YAML configuration file strictly, for the etcd
// this module embeds: LoadFile for moduleRelease.
func LoadConfig(path string) (*embed.Config, error) {
	f, err := LoadFile(path, moduleRelease)
	if err != nil {
		return nil, err
	}
	return f.Config, nil
}

// LoadFile reads etcd's YAML configuration file strictly, for the etcd
// release that is to read it: a key that release does not read (unknown,
// another release's, or removed in it) and a URL that does not parse are
// errors naming the key, and what replaces it when something does.
//
// ${VAR} in the file is replaced by the environment variable VAR, so one
// file serves every pod of a StatefulSet (${POD_NAME}); an unset variable
// is an error.
func LoadFile(path string, release etcdversion.Version) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("etcd config: %w", err)
	}
	if b, err = expandEnv(b); err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", path, err)
	}
	return loadFile(path, b, release)
}

// druidKeys are keys etcd-druid writes into every member's configuration
// for its own tools, with why LoadServedFile drops them. A release that
// reads one of them keeps it.
var druidKeys = map[string]string{
	"member-name-prefix":              "etcd-druid's prefix of member names, read by the sidecar",
	"next-cluster-version-compatible": "etcd 3.4's, which lets a 3.4 member join a 3.5 cluster on the way back; no release etcdkit runs reads it",
}

// LoadServedConfig reads a configuration a sidecar served for the etcd
// this module embeds: LoadServedFile for moduleRelease.
func LoadServedConfig(b []byte, source string, log *slog.Logger) (*embed.Config, error) {
	f, err := LoadServedFile(b, source, moduleRelease, log)
	if err != nil {
		return nil, err
	}
	return f.Config, nil
}

// LoadServedFile reads a configuration a sidecar served (an
// etcd-backup-restore sidecar's /config) as strictly as LoadFile, but for
// the keys etcd-druid writes for its own tools that the release does not
// read, which are dropped and logged. Nothing in it is expanded.
func LoadServedFile(b []byte, source string, release etcdversion.Version, log *slog.Logger) (*File, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", source, err)
	}
	keys, err := keysOf(release)
	if err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(raw) {
		if why, ok := druidKeys[k]; ok && !keys[k] {
			log.Info("wrapper: the served etcd config's key is dropped", "key", k, "value", raw[k], "why", why, "etcd", release)
			delete(raw, k)
		}
	}
	b, err = yaml.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", source, err)
	}
	return loadFile(source, b, release)
}

// keysOf is the set of keys release reads.
func keysOf(release etcdversion.Version) (map[string]bool, error) {
	list, ok := releaseKeys[release.MinorString()]
	if !ok {
		return nil, fmt.Errorf("etcd config: %w", etcdversion.CheckSupported(release))
	}
	return knownKeys(list), nil
}

// unread says why release does not read key: the releases that do, and
// what replaces it, when anything does.
func unread(key string, release etcdversion.Version) string {
	var readers []etcdversion.Version
	for _, v := range etcdversion.Supported {
		if slices.Contains(releaseKeys[v.MinorString()], key) {
			readers = append(readers, v)
		}
	}
	if len(readers) == 0 {
		return fmt.Sprintf("%q is not a key of etcd's configuration file", key)
	}
	msg := fmt.Sprintf("%q is not read by etcd %s, which ignores it without a word (etcd %s reads it)", key, release.MinorString(), etcdversion.Names(readers))
	if repl, ok := removed[key]; ok && !release.Less(etcdversion.MustParse("3.7")) {
		msg = fmt.Sprintf("%q was removed in etcd 3.7, which ignores it without a word", key)
		if repl != "" {
			msg += fmt.Sprintf("; use %q instead", repl)
		}
		return msg
	}
	for old, repl := range removed {
		if repl == key && slices.Contains(releaseKeys[release.MinorString()], old) {
			return msg + fmt.Sprintf("; etcd %s reads %q", release.MinorString(), old)
		}
	}
	return msg
}

// loadFile checks the configuration b, from path, for release and loads
// it.
func loadFile(path string, b []byte, release etcdversion.Version) (*File, error) {
	known, err := keysOf(release)
	if err != nil {
		return nil, err
	}
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
	var problems []string
	for _, k := range sortedKeys(raw) {
		if !known[k] {
			problems = append(problems, unread(k, release))
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
		return nil, fmt.Errorf("etcd config %s (for etcd %s): %s", path, release.MinorString(), strings.Join(problems, "; "))
	}
	// This module's etcd reads the settings every release reads alike, and
	// ignores the keys only an older one reads; etcd reads a file: it gets
	// the expanded one.
	cfg, err := embed.ConfigFromFile(expanded.Name())
	if err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("etcd config %s: %w", path, err)
	}
	return &File{Release: release, Keys: raw, Config: cfg}, nil
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

// knownKeys is the set of a release's keys.
func knownKeys(list []string) map[string]bool {
	keys := make(map[string]bool, len(list))
	for _, k := range list {
		keys[k] = true
	}
	return keys
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
// sidecar answers, for at most wait, and read by LoadServedFile for
// release.
func ServedConfig(ctx context.Context, c *etcdbrapi.Client, release etcdversion.Version, wait time.Duration, log *slog.Logger) (*File, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		b, err := c.Config(ctx)
		if err == nil {
			return LoadServedFile(b, c.Base+"/config", release, log)
		}
		log.Info("wrapper: waiting for the sidecar's etcd config", "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wrapper: the sidecar's etcd config: %w (last: %w)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}
