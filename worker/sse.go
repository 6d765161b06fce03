package worker

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// sseReader reads server-sent events (text/event-stream): each event is
// the "data:" lines before a blank line, joined with newlines. Comments
// (lines starting with ":") and other fields are skipped.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the data of the next event, or io.EOF after the last one.
// An event cut off by the end of the stream is returned as it stands.
func (s *sseReader) next() (string, error) {
	var data strings.Builder
	has := false
	for {
		line, err := s.r.ReadBytes('\n')
		if err != nil && len(line) == 0 {
			if err == io.EOF && has {
				return data.String(), nil
			}
			return "", err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if has {
				return data.String(), nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(field) == 0 {
			continue // a comment, such as a keep-alive
		}
		if string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if has {
			data.WriteByte('\n')
		}
		data.Write(value)
		has = true
	}
}
