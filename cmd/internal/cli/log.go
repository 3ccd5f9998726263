package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
)

// Log is the --log-format and --log-level flags. The zero value logs text
// at info.
type Log struct {
	Format string
	Level  string
}

// Flags registers the flags on fs.
func (l *Log) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&l.Format, "log-format", "text", "log format: text or json")
	fs.StringVar(&l.Level, "log-level", "info", "log level: debug, info, warn or error")
}

// Logger is a slog logger writing to w as the flags say.
func (l Log) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if l.Level != "" {
		if err := level.UnmarshalText([]byte(l.Level)); err != nil {
			return nil, fmt.Errorf("--log-level %q: debug, info, warn or error", l.Level)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(l.Format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: text or json", l.Format)
}
