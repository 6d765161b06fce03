package wire_test

import (
	"strings"
	"testing"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/wire"
)

// TestSearchQuery checks how wire.SearchQuery rewrites a query for
// websearch_to_tsquery: every word and phrase quoted, one dash at most,
// or kept between items only, pieces without a letter or digit dropped.
func TestSearchQuery(t *testing.T) {
	t.Parallel()
	for query, want := range map[string]string{
		"sourdough starter":         `"sourdough" "starter"`,
		`"sourdough starter" bread`: `"sourdough starter" "bread"`,
		`"unclosed phrase`:          `"unclosed phrase"`,
		"bread -rye":                `"bread" -"rye"`,
		"bread ---- - rye":          `"bread" -"rye"`,
		`bread -"rye flour"`:        `"bread" -"rye flour"`,
		"rye or spelt":              `"rye" or "spelt"`,
		"rye OR or spelt or":        `"rye" or "spelt"`,
		"or rye":                    `"rye"`,
		"rye -or spelt":             `"rye" -"or" "spelt"`,
		"e-mail a.b@example.com":    `"e-mail" "a.b@example.com"`,
		"rye!spelt&(oat)|barley<->": `"rye" "spelt" "oat" "barley"`,
		"<-<-<-rye":                 `-"rye"`,
		strings.Repeat("-", 33):     ``,
		"!!!! &|<-> \"\" \"...\"":   ``,
		" \t ":                      ``,
		"東京 café 🍞":                 `"東京" "café"`,
	} {
		got, err := wire.SearchQuery("query", query)
		if err != nil || got != want {
			t.Errorf("SearchQuery(%q) = %q, %v; want %q", query, got, err, want)
		}
	}
	for query, message := range map[string]string{
		"":                             "query: is required",
		strings.Repeat("a", 501):       "query: is 501 characters long; the limit is 500",
		"a\x00b":                       "query: must not contain NUL characters",
		strings.Repeat("w ", 33):       "query: has 33 words; the limit is 32",
		`"` + strings.Repeat("w ", 40): "query: has 40 words; the limit is 32",
	} {
		_, err := wire.SearchQuery("query", query)
		if conversation.ErrorCode(err) != conversation.Invalid || err.Error() != message {
			t.Errorf("SearchQuery(%.40q) = %v; want invalid %q", query, err, message)
		}
	}
}
