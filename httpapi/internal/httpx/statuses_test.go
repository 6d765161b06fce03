package httpx

import (
	"testing"

	"github.com/convo-dev/convo/conversation"
)

// TestEveryCodeHasAStatus: a domain code without an entry would be
// answered 500.
func TestEveryCodeHasAStatus(t *testing.T) {
	for _, c := range conversation.Codes {
		if _, ok := statuses[c]; !ok {
			t.Errorf("domain code %q has no HTTP status", c)
		}
	}
}
