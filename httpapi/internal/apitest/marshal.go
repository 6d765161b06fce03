package apitest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Marshal is v's JSON as a request body, HTML characters (<, >, &) left as
// they are, so that a test can find and replace a value in it as written.
func Marshal(t testing.TB, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
