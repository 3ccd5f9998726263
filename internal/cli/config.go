package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Bind fills every flag of cmd the command line left unset from, in this
// order, the environment variable ETCDKIT_<FLAG> (upper case, dashes as
// underscores) and the YAML file named by the flag fileFlag (keys are flag
// names). It is cobra's PersistentPreRunE of the binaries.
func Bind(cmd *cobra.Command, fileFlag string) error {
	file := map[string]any{}
	if f := cmd.Flags().Lookup(fileFlag); f != nil && f.Value.String() != "" {
		b, err := os.ReadFile(f.Value.String())
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if err := yaml.UnmarshalStrict(b, &file); err != nil {
			return fmt.Errorf("config %s: %w", f.Value.String(), err)
		}
	}
	known := map[string]bool{}
	var errs []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		known[f.Name] = true
		if f.Changed {
			return
		}
		if v, ok := os.LookupEnv(EnvName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", EnvName(f.Name), v, err))
			}
			return
		}
		v, ok := file[f.Name]
		if !ok {
			return
		}
		for _, s := range values(v) {
			if err := f.Value.Set(s); err != nil {
				errs = append(errs, fmt.Sprintf("config key %s: %v", f.Name, err))
			}
		}
	})
	for k := range file {
		if !known[k] {
			errs = append(errs, fmt.Sprintf("config key %q is not a flag of %s", k, cmd.CommandPath()))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
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
