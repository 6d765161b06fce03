package connectapi

import (
	"testing"

	"github.com/convo-dev/convo/conversation"
)

// TestEveryCodeHasAConnectCode: a domain code without an entry would be
// sent as Internal.
func TestEveryCodeHasAConnectCode(t *testing.T) {
	for _, c := range conversation.Codes {
		if _, ok := codes[c]; !ok {
			t.Errorf("domain code %q has no Connect code", c)
		}
	}
}
