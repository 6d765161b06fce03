package history

import (
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/httpapi/internal/eventscript"
)

func TestCoalesce(t *testing.T) {
	t.Parallel()
	s := eventscript.New()
	events := []*convov1.Event{
		s.Started("P", "M"),
		s.Start("P", "M", "R", "reasoning", 0, nil), s.Delta("P", "M", "R", "Think "), s.Delta("P", "M", "R", "hard."),
		s.End("P", "M", "R", nil),
		s.Start("P", "M", "T", "tool_use", 1, nil), s.Delta("P", "M", "T", `{"x":`), s.Delta("P", "M", "T", `1}`),
		s.ToolStarted("C", "T", "calc", map[string]any{"x": 1}), s.Progress("C", "T", "a"), s.Progress("C", "T", "b"),
		s.ToolDone("C", "T", "calc", "ab", ""), s.End("P", "M", "T", nil),
		s.Start("P", "M", "Y", "text", 2, nil), s.Delta("P", "M", "Y", "Hel"), s.Delta("P", "M", "Y", "lo"),
		// Two blocks streaming at once: adjacency is per block.
		s.Start("P", "M", "Z", "text", 3, nil), s.Delta("P", "M", "Z", "[z]"), s.Delta("P", "M", "Y", ", "),
		s.Delta("P", "M", "Y", "world"), s.End("P", "M", "Y", nil), s.Delta("P", "M", "Z", "[z2]"), s.End("P", "M", "Z", nil),
		s.Completed("P", "M"),
	}
	before := make([]*convov1.Event, len(events))
	for i, e := range events {
		before[i] = proto.Clone(e).(*convov1.Event)
	}

	got := coalesce(events)

	var kinds []string
	for _, e := range got {
		m := e.ProtoReflect()
		k := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind")).JSONName()
		if d := e.GetBlockDelta(); d != nil {
			k += "(" + d.BlockId + ":" + d.Content + "@" + strconv.FormatInt(e.Seq, 10) + ")"
		}
		kinds = append(kinds, k)
	}
	want := []string{
		"promptStarted",
		"blockStart", "blockDelta(R:Think hard.@3)", "blockEnd",
		// tool_use arguments and tool call events: kept as they are.
		"blockStart", "blockDelta(T:{\"x\":@7)", "blockDelta(T:1}@8)",
		"toolCallStarted", "toolCallProgress", "toolCallProgress", "toolCallCompleted", "blockEnd",
		"blockStart", "blockDelta(Y:Hello@15)",
		"blockStart", "blockDelta(Z:[z]@18)", "blockDelta(Y:, world@19)", "blockEnd", "blockDelta(Z:[z2]@22)", "blockEnd",
		"promptCompleted",
	}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("coalesced:\n%s\nwant\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}

	// The text is identical, and the merged event keeps the first's time.
	text := func(events []*convov1.Event, block string) string {
		var b strings.Builder
		for _, e := range events {
			if d := e.GetBlockDelta(); d != nil && d.BlockId == block {
				b.WriteString(d.Content)
			}
		}
		return b.String()
	}
	for _, block := range []string{"R", "T", "Y", "Z"} {
		if text(got, block) != text(events, block) {
			t.Errorf("block %s: %q, want %q", block, text(got, block), text(events, block))
		}
	}
	if !proto.Equal(got[2].CreatedAt, events[2].CreatedAt) {
		t.Errorf("merged event's time %v, want the first's %v", got[2].CreatedAt, events[2].CreatedAt)
	}
	for i := range events {
		if !proto.Equal(events[i], before[i]) {
			t.Fatalf("event %d was modified: %v", i, events[i])
		}
	}
	if out := coalesce(nil); len(out) != 0 {
		t.Errorf("coalesce(nil) = %v", out)
	}
}
