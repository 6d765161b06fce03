package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logFailure logs msg with the first line of err, and writes the lines
// that follow it (initdb's output, the end of a server log) to w as they
// are, indented, so that they read as lines rather than as one quoted
// string of \n escapes in the log line.
func logFailure(logger *slog.Logger, w io.Writer, msg string, err error) {
	first, rest, multi := strings.Cut(err.Error(), "\n")
	if !multi {
		logger.Error(msg, "err", first)
		return
	}
	logger.Error(msg, "err", first, "details", "below")
	for line := range strings.SplitSeq(strings.TrimRight(rest, "\n"), "\n") {
		fmt.Fprintln(w, "    "+line)
	}
}
