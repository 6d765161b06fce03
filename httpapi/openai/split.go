package openai

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/convo-dev/convo/conversation"
)

// split returns e, or, for a blockDelta that compaction merged from a run
// of deltas (docs/events.md, "Compaction": its mergedLengths, in
// characters), the run's deltas again, cut at their original boundaries,
// so that the fold numbers a compacted prompt's events as it numbered
// them live. A payload whose lengths do not add up to its content is
// taken whole.
func split(e conversation.Event) []conversation.Event {
	if e.Kind != conversation.EventBlockDelta {
		return []conversation.Event{e}
	}
	var p struct {
		Content       string `json:"content"`
		MergedLengths []int  `json:"mergedLengths"`
	}
	if json.Unmarshal(e.Payload, &p) != nil || len(p.MergedLengths) < 2 {
		return []conversation.Event{e}
	}
	total := 0
	for _, n := range p.MergedLengths {
		if n < 0 {
			return []conversation.Event{e}
		}
		total += n
	}
	if total != utf8.RuneCountInString(p.Content) {
		return []conversation.Event{e}
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(e.Payload, &fields) != nil {
		return []conversation.Event{e}
	}
	delete(fields, "mergedLengths")
	out := make([]conversation.Event, 0, len(p.MergedLengths))
	rest := p.Content
	for _, n := range p.MergedLengths {
		cut := 0
		for range n {
			_, size := utf8.DecodeRuneInString(rest[cut:])
			cut += size
		}
		fields["content"], _ = json.Marshal(rest[:cut])
		rest = rest[cut:]
		one := e
		one.Payload, _ = json.Marshal(fields)
		out = append(out, one)
	}
	return out
}
