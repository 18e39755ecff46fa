// Package log builds the zerolog logger: JSON lines by default, console format on a TTY.
package log

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/term"
)

// New returns a logger writing to w at level ("debug", "info", "warn", "error") in format
// ("json", "console", or "" = console when w is a terminal).
func New(w io.Writer, level, format string) zerolog.Logger {
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "console"
		}
	}
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}
