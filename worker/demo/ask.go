package demo

import (
	"regexp"
	"strings"
)

// The parts of an "/ask" message that askArgs reads: the command itself, a
// "which <noun>" (or "what kind of <noun>"), and two words joined by "or".
var (
	askCommandRE = regexp.MustCompile(`(?i)^\s*/ask\b`)
	whichNounRE  = regexp.MustCompile(`(?i)\b(?:which|what (?:kind|sort|type) of)\s+(\p{L}[\p{L}'-]*)`)
	eitherOrRE   = regexp.MustCompile(`(?i)\b(\p{L}[\p{L}'-]*)\s+or\s+(?:(?:a|an|the|some)\s+)?(\p{L}[\p{L}'-]*)`)
)

// notNouns are words that may follow "which" without naming a thing to
// choose ("which one should I pick", "which of these"), and words around
// "or" that are no choice ("this or that" is, "whether or not" is not).
var notNouns = map[string]bool{
	"one": true, "ones": true, "of": true, "is": true, "are": true, "was": true, "were": true,
	"do": true, "does": true, "did": true, "should": true, "would": true, "could": true,
	"can": true, "will": true, "shall": true, "may": true, "might": true, "must": true,
	"the": true, "a": true, "an": true, "way": true, "not": true, "whether": true,
	"me": true, "i": true, "you": true, "it": true, "we": true, "they": true, "to": true,
}

// askArgs are the arguments of the ask_user call that "/ask" makes: a
// question that fits what the user wrote after the command, derived from
// it by fixed rules (the same message always asks the same question):
//
//   - "which <noun>" or "what kind of <noun>" in it: "Which <noun> do you
//     like best?", answered in the user's words ("/ask which fruit should
//     I eat?");
//   - two words joined by "or": which of the two, as choices ("/ask tea or
//     coffee?");
//   - nothing after the command, or only "me …" ("/ask me something"):
//     the favourite colour, with the choices red, green and blue;
//   - anything else: what matters most to the user about it, quoted.
func askArgs(text string) map[string]any {
	rest := strings.TrimSpace(askCommandRE.ReplaceAllString(text, ""))
	rest = strings.Join(strings.Fields(rest), " ")
	if m := whichNounRE.FindStringSubmatch(rest); m != nil && !notNouns[strings.ToLower(m[1])] {
		return map[string]any{"question": "Which " + strings.ToLower(m[1]) + " do you like best?"}
	}
	if m := eitherOrRE.FindStringSubmatch(rest); m != nil && !notNouns[strings.ToLower(m[1])] && !notNouns[strings.ToLower(m[2])] &&
		!strings.EqualFold(m[1], m[2]) {
		a, b := strings.ToLower(m[1]), strings.ToLower(m[2])
		return map[string]any{"question": "Which do you prefer: " + a + " or " + b + "?", "choices": []string{a, b}}
	}
	lower := strings.ToLower(rest)
	if rest == "" || lower == "me" || strings.HasPrefix(lower, "me ") {
		return map[string]any{"question": "Which colour do you like best?", "choices": []string{"red", "green", "blue"}}
	}
	topic := strings.TrimRight(rest, " ?!.")
	if r := []rune(topic); len(r) > 80 {
		topic = strings.TrimRight(string(r[:80]), " ") + "…"
	}
	return map[string]any{"question": "Before I answer “" + topic + "”: what matters most to you here?"}
}
