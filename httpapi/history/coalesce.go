package history

import (
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire/view"
)

// coalesce returns events with each run of adjacent blockDelta events of
// one block whose kind streams (view.Kind.Streams: text, reasoning)
// merged into one event: the run's first
// (with its seq and createdAt) carrying the run's content concatenated.
// Every other event is kept as it is and where it is, so the boundaries
// between blocks, and around tool calls, stay where they were; the deltas
// of other kinds (tool_use arguments, structured output, workers' own
// block types) are kept as they were sent. A block's
// type is read from its blockStart in events; the deltas of a block whose
// start is not there are kept as they are. events is not modified.
func coalesce(events []*convov1.Event) []*convov1.Event {
	types := map[string]string{}
	out := make([]*convov1.Event, 0, len(events))
	owned := false // out's last event is a copy coalesce may extend
	for _, ev := range events {
		if s := ev.GetBlockStart(); s != nil {
			types[s.BlockId] = s.BlockType
		}
		d := ev.GetBlockDelta()
		if d != nil && view.KindOf(types[d.BlockId]).Streams() && len(out) > 0 {
			if prev := out[len(out)-1].GetBlockDelta(); prev != nil && prev.BlockId == d.BlockId {
				if !owned {
					out[len(out)-1] = proto.Clone(out[len(out)-1]).(*convov1.Event)
					owned = true
				}
				out[len(out)-1].GetBlockDelta().Content += d.Content
				continue
			}
		}
		out = append(out, ev)
		owned = false
	}
	return out
}
