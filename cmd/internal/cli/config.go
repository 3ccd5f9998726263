package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// harnessEnv are variables of the project's tests and tools that share
// the prefix; a binary started by a test sees them and must not refuse
// them.
var harnessEnv = []string{"ETCDKIT_REQUIRE_EMULATORS", "ETCDKIT_TOOLS_DIR", "ETCDKIT_LONG", "ETCDKIT_KILL_DIR"}

// serviceLink matches the variables Kubernetes gives every container for
// a Service named etcdkit in its namespace (its "service links", on unless
// the pod says enableServiceLinks: false): ETCDKIT_SERVICE_HOST,
// ETCDKIT_SERVICE_PORT[_<port name>], ETCDKIT_PORT and
// ETCDKIT_PORT_<port>_<protocol>[_PROTO|_PORT|_ADDR]. They are no flags.
var serviceLink = regexp.MustCompile(`^ETCDKIT_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$`)

// Bind fills every flag of cmd the command line left unset from, in this
// order, the environment variable ETCDKIT_<FLAG> (upper case, dashes as
// underscores) and the YAML file named by the flag fileFlag (keys are flag
// names; the file itself may come from ETCDKIT_<FILEFLAG>). It is cobra's
// PersistentPreRunE of the binaries.
//
// One file and one environment serve every command of a binary: a key or
// variable that is a flag of another command is ignored, one that is a
// flag of none is an error, as is a list for a flag that takes one value.
func Bind(cmd *cobra.Command, fileFlag string) error {
	all := allFlags(cmd.Root())
	errs := unknownEnv(all, cmd.Root().Name())
	file, err := configFile(cmd.Flags().Lookup(fileFlag))
	if err != nil {
		return err
	}
	if err := aliasesOnce(cmd.Flags()); err != nil {
		return err
	}
	// A flag and its alias share one value: once either is set, the
	// other is too, and neither is filled from the environment or the
	// file.
	set := changedValues(cmd.Flags())
	known := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		known[f.Name] = true
		if f.Changed || set[f.Value] {
			return
		}
		// Set through the flag set: a flag the environment or the file
		// gives is Changed, as one given on the command line is.
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if err := cmd.Flags().Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", EnvName(f.Name), v, err))
			}
			set[f.Value] = true
			return
		}
		v, ok := file[f.Name]
		if !ok {
			return
		}
		if _, list := v.([]any); list {
			if _, slice := f.Value.(pflag.SliceValue); !slice {
				errs = append(errs, fmt.Sprintf("config key %s: a list, but --%s takes one value", f.Name, f.Name))
				return
			}
		}
		for _, s := range values(v) {
			if err := cmd.Flags().Set(f.Name, s); err != nil {
				errs = append(errs, fmt.Sprintf("config key %s: %v", f.Name, err))
			}
		}
		set[f.Value] = true
	})
	for _, k := range slices.Sorted(maps.Keys(file)) {
		if !known[k] && !all[k] {
			errs = append(errs, fmt.Sprintf("config key %q is not a flag of %s", k, cmd.Root().Name()))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// unknownEnv names each ETCDKIT_ variable that is no flag of the binary
// root names (nor the test harness's, nor a Kubernetes service link).
func unknownEnv(all map[string]bool, root string) []string {
	var errs []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "ETCDKIT_") && !all[name] && !slices.Contains(harnessEnv, name) && !serviceLink.MatchString(name) {
			errs = append(errs, fmt.Sprintf("environment variable %s is not a flag of %s (variables are ETCDKIT_ and a flag's name, upper case, dashes as underscores)", name, root))
		}
	}
	return errs
}

// configFile reads the YAML file the flag f names (set from its
// environment variable when the command line left it unset): its keys,
// none without f or a path.
func configFile(f *pflag.Flag) (map[string]any, error) {
	file := map[string]any{}
	if f == nil {
		return file, nil
	}
	if v, ok := os.LookupEnv(EnvName(f.Name)); ok && !f.Changed {
		if err := f.Value.Set(v); err != nil {
			return nil, err
		}
	}
	path := f.Value.String()
	if path == "" {
		return file, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return file, nil
}

// allFlags are the names and environment variables of every flag of
// root and its commands.
func allFlags(root *cobra.Command) map[string]bool {
	all := map[string]bool{}
	add := func(f *pflag.Flag) { all[f.Name], all[EnvName(f.Name)] = true, true }
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return all
}

// EnvName is the environment variable of a flag.
func EnvName(flag string) string {
	return "ETCDKIT_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// values turns a YAML value into flag values: a list sets a repeated flag
// once per item, a map becomes name=value pairs.
func values(v any) []string {
	switch v := v.(type) {
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, fmt.Sprint(e))
		}
		return out
	case map[string]any:
		var out []string
		for k, e := range v {
			out = append(out, fmt.Sprintf("%s=%v", k, e))
		}
		return []string{strings.Join(out, ",")}
	case nil:
		return nil
	}
	return []string{fmt.Sprint(v)}
}

// etcdctlFlags are the flags etcd-backup shares with etcdctl, name and
// meaning, which etcdctl also reads from ETCDCTL_<FLAG>.
var etcdctlFlags = []string{"endpoints", "cacert", "cert", "key", "user", "insecure-skip-tls-verify", "dial-timeout", "command-timeout"}

// BindEtcdctl fills each flag of cmd that etcdctl shares, still unset
// after Bind, from etcdctl's variable ETCDCTL_<FLAG>: a shell set up for
// etcdctl reaches the same cluster with etcd-backup. The command line,
// ETCDKIT_<FLAG> and the config file come first: they are etcd-backup's
// own. An empty variable is unset. It returns the flags it filled, and
// warnings for what it did not read: a value the flag does not take (a
// command that never reaches etcd must not fail on a variable meant for
// etcdctl), and ETCDCTL_USER's password, since etcd-backup reads
// passwords from --password-file only.
func BindEtcdctl(cmd *cobra.Command) (filled map[string]bool, warnings []string) {
	filled = map[string]bool{}
	set := changedValues(cmd.Flags())
	for _, name := range etcdctlFlags {
		f := cmd.Flags().Lookup(name)
		if f == nil || f.Changed || set[f.Value] {
			continue
		}
		env := "ETCDCTL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		v := os.Getenv(env)
		if v == "" {
			continue
		}
		if name == "user" {
			var password bool
			if v, _, password = strings.Cut(v, ":"); password {
				warnings = append(warnings, fmt.Sprintf("%s holds a password, which is not read: etcd-backup reads passwords from --password-file (or ETCDKIT_PASSWORD_FILE) only", env))
			}
		}
		if err := setOrKeep(cmd.Flags(), f, v); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s=%q is not read (--%s: %v)", env, v, name, err))
			continue
		}
		filled[name] = true
	}
	return filled, warnings
}

// setOrKeep sets flag f of fs to v, or leaves its value as it was when
// v is not one it takes (a flag's Set may clear it before it fails).
func setOrKeep(fs *pflag.FlagSet, f *pflag.Flag, v string) error {
	if slice, ok := f.Value.(pflag.SliceValue); ok {
		old := slice.GetSlice()
		if err := fs.Set(f.Name, v); err != nil {
			return errors.Join(err, slice.Replace(old))
		}
		return nil
	}
	old := f.Value.String()
	if err := fs.Set(f.Name, v); err != nil {
		return errors.Join(err, f.Value.Set(old))
	}
	return nil
}

// changedValues are the values of fs that a changed flag set: a flag and
// its aliases share one.
func changedValues(fs *pflag.FlagSet) map[pflag.Value]bool {
	set := map[pflag.Value]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			set[f.Value] = true
		}
	})
	return set
}

// aliasesOnce refuses a flag given under both its names: one would
// silently win, or a list take the values of both.
func aliasesOnce(fs *pflag.FlagSet) error {
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if of := f.Annotations[aliasOf]; len(of) == 1 && f.Changed && fs.Changed(of[0]) {
			errs = append(errs, fmt.Sprintf("--%s and --%s are one flag: give one", of[0], f.Name))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Schemes gives each endpoint without a scheme one, as etcdctl does:
// https:// when secure (a CA or a client certificate is given), else
// http://.
func Schemes(endpoints []string, secure bool) []string {
	out := make([]string, len(endpoints))
	for i, ep := range endpoints {
		switch {
		case strings.Contains(ep, "://"):
			out[i] = ep
		case secure:
			out[i] = "https://" + ep
		default:
			out[i] = "http://" + ep
		}
	}
	return out
}

// Alias makes alias (with shorthand, "" for none) another name of fs's
// flag name, the one tool (etcdctl, etcdutl) gives it: one value, set by
// either.
func Alias(fs *pflag.FlagSet, name, alias, shorthand, tool string) {
	f := fs.Lookup(name)
	a := fs.VarPF(f.Value, alias, shorthand, fmt.Sprintf("%s's name for --%s", tool, name))
	a.NoOptDefVal = f.NoOptDefVal
	_ = fs.SetAnnotation(alias, aliasOf, []string{name})
}

// aliasOf annotates an alias with the flag it names.
const aliasOf = "etcdkit-alias-of"
