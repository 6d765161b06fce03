package apitest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// JSONStream reads a stream whose every event is one unnamed "data:" line
// of JSON without an id, as AG-UI's and the AI SDK's are, keeping each
// event's data as sent (Raw) for a verifier.
type JSONStream struct {
	C   *SSEClient
	Raw []string
	// end is the data of the event that closes the stream, not JSON (the
	// AI SDK's "[DONE]"); "" when there is none.
	end string
}

// OpenJSONStream opens a stream that must answer 200, sending body, when
// it is not nil, as JSON. end, when set, is the data of the event that
// closes the stream, which Next returns as {"type": end}.
func OpenJSONStream(t testing.TB, method, url string, header http.Header, body any, end string) *JSONStream {
	t.Helper()
	if header == nil {
		header = http.Header{}
	}
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
		header.Set("Content-Type", "application/json")
	}
	return &JSONStream{C: OpenSSE(t, method, url, header, r), end: end}
}

// Next returns the next event's JSON object, failing the test when none
// comes, or when it has SSE fields besides its data or is not JSON.
func (s *JSONStream) Next(t testing.TB) map[string]any {
	t.Helper()
	ev := s.C.Next(t)
	if ev.Name != "" || ev.HasID {
		t.Fatalf("event with SSE fields (want one data line): %+v", ev)
	}
	s.Raw = append(s.Raw, ev.Data)
	if s.end != "" && ev.Data == s.end {
		return map[string]any{"type": s.end}
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(ev.Data), &out); err != nil {
		t.Fatalf("event %s: %v", ev.Data, err)
	}
	return out
}

// Until reads events up to and including the first of one of types.
func (s *JSONStream) Until(t testing.TB, types ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for {
		ev := s.Next(t)
		out = append(out, ev)
		for _, typ := range types {
			if ev["type"] == typ {
				return out
			}
		}
	}
}
