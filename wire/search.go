package wire

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxSearchTerms bounds the words of a search query (runs of characters
// between spaces that hold a letter or a digit); the words of a quoted
// phrase count, "or" does not.
const MaxSearchTerms = 32

// SearchQuery checks a search query field (CheckText: required, at most
// MaxSearchQuery characters, no NUL; at most MaxSearchTerms words) and
// rewrites it into a form that PostgreSQL's websearch_to_tsquery reads as
// the user meant it but cannot fail on. The syntax is web search's:
//
//   - words, each of which must match (stemmed, English);
//   - "a quoted phrase", whose words must follow each other (an unclosed
//     quote runs to the end);
//   - -word or -"a phrase", which must not match; any number of dashes
//     count as one;
//   - or between two words or phrases, either of which may match.
//
// The characters ! & | ( ) < separate words, as in websearch_to_tsquery.
// Every word and phrase comes out quoted, with at most one dash before it:
// inside quotes PostgreSQL reads no operators, so no query can nest
// operators deeply enough to fail ("tsquery stack too small", which 33
// dashes in a row raised). Pieces without a letter or digit are left
// out (PostgreSQL finds no lexeme in them), so the result is "" when the
// query has no word at all (only punctuation and operators); the caller
// then finds nothing.
func SearchQuery(field, query string) (string, error) {
	if err := CheckText(field, query, true, MaxSearchQuery); err != nil {
		return "", err
	}
	var out strings.Builder
	words := 0
	exclude, or := false, false
	item := func(text string) {
		// A piece of text without a letter or digit has no lexeme:
		// PostgreSQL would drop it.
		n := 0
		for _, f := range strings.Fields(text) {
			if strings.IndexFunc(f, isLetterOrDigit) >= 0 {
				n++
			}
		}
		if n == 0 {
			exclude = false
			return
		}
		words += n
		switch {
		case out.Len() > 0 && or:
			out.WriteString(" or ")
		case out.Len() > 0:
			out.WriteByte(' ')
		}
		if exclude {
			out.WriteByte('-')
		}
		out.WriteByte('"')
		out.WriteString(text)
		out.WriteByte('"')
		exclude, or = false, false
	}
	for rest := query; rest != ""; {
		r, size := utf8.DecodeRuneInString(rest)
		switch {
		case r == '"':
			phrase := rest[1:]
			rest = ""
			if end := strings.IndexByte(phrase, '"'); end >= 0 {
				phrase, rest = phrase[:end], phrase[end+1:]
			}
			item(phrase)
		case r == '-':
			exclude = true
			rest = rest[size:]
		case unicode.IsSpace(r) || isSearchOperator(r):
			rest = rest[size:]
		default:
			end := strings.IndexFunc(rest, func(r rune) bool {
				return r == '"' || unicode.IsSpace(r) || isSearchOperator(r)
			})
			if end < 0 {
				end = len(rest)
			}
			word := rest[:end]
			rest = rest[end:]
			// "or" joins the items either side of it; anywhere else it
			// is a stop word, found nowhere.
			if strings.EqualFold(word, "or") && !exclude {
				or = out.Len() > 0
				continue
			}
			item(word)
		}
	}
	if words > MaxSearchTerms {
		return "", Invalid(field, "has %d words; the limit is %d", words, MaxSearchTerms)
	}
	return out.String(), nil
}

func isLetterOrDigit(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// isSearchOperator reports the characters websearch_to_tsquery skips
// between words.
func isSearchOperator(r rune) bool {
	return strings.ContainsRune("!&|()<", r)
}
