package history

import (
	"google.golang.org/protobuf/proto"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// coalescedBlockTypes are the blocks whose deltas coalesce merges: text and
// reasoning. Everything else (tool_use arguments, tool calls' events,
// structured output, workers' own block types) is kept as it was sent.
var coalescedBlockTypes = map[string]bool{"text": true, "reasoning": true}

// coalesce returns events with each run of adjacent blockDelta events of
// one text or reasoning block merged into one event: the run's first
// (with its seq and createdAt) carrying the run's content concatenated.
// Every other event is kept as it is and where it is, so the boundaries
// between blocks, and around tool calls, stay where they were. A block's
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
		if d != nil && coalescedBlockTypes[types[d.BlockId]] && len(out) > 0 {
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
