package fakeserver

import (
	"fmt"
	"log/slog"
	"strings"
)

// LogfLogger is a logger whose records go, one line each ("level=INFO msg=... key=value"), to a
// printf-style function: cri-fake's Options.Logf, which its tests and older callers give.
func LogfLogger(logf func(format string, args ...any)) *slog.Logger {
	return slog.New(slog.NewTextHandler(logfWriter(logf), &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // the function's own output says when, if it wants to
			}
			return a
		},
	}))
}

// logfWriter receives one whole record per Write from slog's text handler.
type logfWriter func(format string, args ...any)

func (w logfWriter) Write(b []byte) (int, error) {
	w("%s", strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// Logf is a printf-style function that logs to log at level Info, for the packages below the
// servers that take one (cri-fake's runtime and network).
func Logf(log *slog.Logger) func(format string, args ...any) {
	return func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
}
