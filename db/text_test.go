package db_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/wire"
)

// TestVisibleAsInGo checks that convo._has_visible and wire.Invisible,
// the database's and the API's rule of what text shows nothing, agree on
// every code point PostgreSQL can store.
func TestVisibleAsInGo(t *testing.T) {
	t.Parallel()
	conn := connect(t, pgtest.DSN(t))
	rows, err := conn.Query(context.Background(), `SELECT cp FROM generate_series(1, 1114111) cp
		WHERE cp NOT BETWEEN 55296 AND 57343 AND NOT convo._has_visible(chr(cp)) ORDER BY cp`)
	if err != nil {
		t.Fatal(err)
	}
	var inSQL []rune
	for rows.Next() {
		var cp int32
		if err := rows.Scan(&cp); err != nil {
			t.Fatal(err)
		}
		inSQL = append(inSQL, cp)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var inGo []rune
	for r := rune(1); r <= unicode.MaxRune; r++ {
		if utf8.ValidRune(r) && wire.Invisible(r) {
			inGo = append(inGo, r)
		}
	}
	if !slices.Equal(inSQL, inGo) {
		for _, r := range inGo {
			if !slices.Contains(inSQL, r) {
				t.Errorf("U+%04X shows nothing in Go but is visible to convo._has_visible", r)
			}
		}
		for _, r := range inSQL {
			if !slices.Contains(inGo, r) {
				t.Errorf("U+%04X shows nothing to convo._has_visible but is visible in Go", r)
			}
		}
	}
	if len(inGo) < 100 {
		t.Fatalf("only %d invisible code points: %s", len(inGo), fmt.Sprint(inGo))
	}
}
