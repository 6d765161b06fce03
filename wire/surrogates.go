package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// CheckJSONSurrogates refuses a JSON text with a string that holds a lone
// UTF-16 surrogate: an escape \ud800–\udfff that is not half of a pair
// (a high surrogate \ud800–\udbff followed at once by a low one
// \udc00–\udfff). Such a string is no text: Go's encoding/json would
// silently read it as U+FFFD, protojson refuses it without naming the
// field. The error is Invalid and names the field by its path in the
// document (messages[0].content, or body for the document itself).
//
// It reads data as it comes and does not check that it is valid JSON,
// which the decoder that follows does; it never recurses, whatever the
// nesting.
func CheckJSONSurrogates(data []byte) error {
	if !bytes.Contains(data, []byte(`\u`)) {
		return nil
	}
	type frame struct {
		object bool
		key    string
		index  int
		// wantKey: the next string of an object is a member's name.
		wantKey bool
	}
	var stack []frame
	path := func(key bool, name string) string {
		var b strings.Builder
		for _, f := range stack {
			switch {
			case !f.object:
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
			case f.wantKey:
				// A member's value is not reached yet: only its name.
			default:
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			}
		}
		if key {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(name)
		}
		if b.Len() == 0 {
			return "body"
		}
		return b.String()
	}
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			stack = append(stack, frame{object: true, wantKey: true})
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].object {
					stack[n-1].wantKey = true
				} else {
					stack[n-1].index++
				}
			}
		case '"':
			end, lone := scanString(data, i)
			n := len(stack)
			isKey := n > 0 && stack[n-1].object && stack[n-1].wantKey
			if lone {
				if isKey {
					return Invalid(path(false, ""), "has a member name with a lone UTF-16 surrogate (an escape \\ud800–\\udfff that is not half of a pair): it is not text")
				}
				return Invalid(path(false, ""), "has a lone UTF-16 surrogate (an escape \\ud800–\\udfff that is not half of a pair): it is not text; send the character as UTF-8 or as a surrogate pair")
			}
			if isKey {
				var name string
				if json.Unmarshal(data[i:min(end+1, len(data))], &name) != nil {
					name = string(data[i+1 : min(end, len(data))])
				}
				stack[n-1].key, stack[n-1].wantKey = name, false
			}
			i = end
		}
	}
	return nil
}

// scanString reads the string literal that starts at data[start] (its
// opening quote) and returns the index of its closing quote (len(data)
// when it has none) and whether it holds a lone surrogate.
func scanString(data []byte, start int) (end int, lone bool) {
	for i := start + 1; i < len(data); i++ {
		switch data[i] {
		case '"':
			return i, lone
		case '\\':
			if i+1 < len(data) && data[i+1] == 'u' {
				v, ok := hex4(data, i+2)
				switch {
				case ok && v >= 0xD800 && v <= 0xDBFF:
					if w, ok := hex4(data, i+8); ok && data[i+6] == '\\' && data[i+7] == 'u' && w >= 0xDC00 && w <= 0xDFFF {
						i += 11 // the pair
						continue
					}
					lone = true
				case ok && v >= 0xDC00 && v <= 0xDFFF:
					lone = true
				}
				i += 5
				continue
			}
			i++ // the escaped character
		}
	}
	return len(data), lone
}

// hex4 reads the four hex digits at data[i:], when they are there.
func hex4(data []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data[i:i+4]), 16, 16)
	return rune(v), err == nil
}
