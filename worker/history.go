package worker

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/worker/internal/wdb"
)

// historyMessages turns the blocks of a conversation's earlier messages
// (convo.worker_context's rows, in order) into a model's context: user and
// system text as they are; an assistant message as its text, its tool calls
// (tool_use blocks), each answered by a tool message (its tool_result
// block, or else the call's own output or error), then the text that
// followed. files are the files of the messages (prompt_files, by
// message), each given to its user message; a message of files only has
// no blocks among rows, and is placed by its position (filePositions).
func historyMessages(rows []wdb.WorkerReplyRow, files map[uuid.UUID][]File, filePositions map[uuid.UUID]int64) []Message {
	// The messages of files only, in order of position.
	var onlyFiles []uuid.UUID
	for id := range files {
		if !slices.ContainsFunc(rows, func(r wdb.WorkerReplyRow) bool { return r.MessageID == id }) {
			onlyFiles = append(onlyFiles, id)
		}
	}
	slices.SortFunc(onlyFiles, func(a, b uuid.UUID) int { return cmp.Compare(filePositions[a], filePositions[b]) })
	var out []Message
	flushBefore := func(pos int64) {
		for len(onlyFiles) > 0 && filePositions[onlyFiles[0]] < pos {
			out = append(out, Message{Role: RoleUser, Files: files[onlyFiles[0]]})
			onlyFiles = onlyFiles[1:]
		}
	}
	for start := 0; start < len(rows); {
		end := start
		for end < len(rows) && rows[end].MessageID == rows[start].MessageID {
			end++
		}
		msg := rows[start:end]
		start = end
		flushBefore(msg[0].MessagePosition)
		switch Role(msg[0].Role) {
		case RoleAssistant:
			out = append(out, assistantHistory(msg)...)
		default:
			var parts []string
			for _, b := range msg {
				if b.BlockType == "text" || b.BlockType == "structured" {
					parts = append(parts, b.Content)
				}
			}
			if len(parts) > 0 || len(files[msg[0].MessageID]) > 0 {
				out = append(out, Message{Role: Role(msg[0].Role), Text: strings.Join(parts, "\n\n"), Files: files[msg[0].MessageID]})
			}
		}
	}
	flushBefore(math.MaxInt64)
	return out
}

// historyCall is a tool call of an assistant turn, waiting for its result.
type historyCall struct {
	call     ToolCall
	fallback string // the call's output or error, when no tool_result answers it
	result   *string
}

// assistantHistory renders the blocks of one assistant message. A turn is
// text followed by tool calls; the results of the calls close it, and text
// after them starts the next turn.
func assistantHistory(blocks []wdb.WorkerReplyRow) []Message {
	var out []Message
	var text strings.Builder
	var calls []*historyCall
	answered := false
	closeTurn := func() {
		if text.Len() == 0 && len(calls) == 0 {
			return
		}
		m := Message{Role: RoleAssistant, Text: text.String()}
		for _, c := range calls {
			m.ToolCalls = append(m.ToolCalls, c.call)
		}
		out = append(out, m)
		for _, c := range calls {
			res := c.fallback
			if c.result != nil {
				res = *c.result
			}
			out = append(out, Message{Role: RoleTool, ToolCallID: c.call.ID, ToolName: c.call.Name, Text: res})
		}
		text.Reset()
		calls = nil
		answered = false
	}
	for _, b := range blocks {
		switch b.BlockType {
		case "text", "structured":
			if len(calls) > 0 {
				closeTurn()
			}
			text.WriteString(b.Content)
		case "tool_use":
			if !b.ToolCallID.Valid || b.ToolName == nil {
				continue // arguments without a recorded call: nothing ran
			}
			if answered {
				closeTurn()
			}
			calls = append(calls, &historyCall{
				call:     ToolCall{ID: b.ToolCallID.UUID.String(), Name: *b.ToolName, Arguments: toolArguments(b.ToolInput)},
				fallback: callOutcome(b),
			})
		case "tool_result":
			answered = true
			content := b.Content
			if c := matchResult(calls, b.Metadata); c != nil {
				c.result = &content
			} else {
				// A result for no call we know: keep it as the assistant's text.
				text.WriteString("\n\n" + content)
			}
		}
	}
	closeTurn()
	return out
}

// matchResult finds the call a tool_result block answers: the one its
// metadata names (toolCallId), or else the first unanswered one.
func matchResult(calls []*historyCall, metadata json.RawMessage) *historyCall {
	var meta struct {
		ToolCallID string `json:"toolCallId"`
	}
	_ = json.Unmarshal(metadata, &meta)
	if id, err := uuid.Parse(meta.ToolCallID); err == nil {
		for _, c := range calls {
			if c.call.ID == id.String() {
				return c
			}
		}
	}
	for _, c := range calls {
		if c.result == nil {
			return c
		}
	}
	return nil
}

// toolArguments is the argument JSON of a recorded call: its input, or the
// raw text a model sent when that was not JSON (kept as a JSON string).
func toolArguments(input json.RawMessage) string {
	var raw string
	if json.Unmarshal(input, &raw) == nil {
		return raw
	}
	return string(input)
}

// callOutcome is what a call's row says happened, for a call without a
// tool_result block.
func callOutcome(b wdb.WorkerReplyRow) string {
	if b.ToolError != nil && *b.ToolError != "" {
		return "error: " + *b.ToolError
	}
	if b.ToolOutput != nil && *b.ToolOutput != "" {
		return *b.ToolOutput
	}
	return "(no result)"
}

// splitPromptRead splits the rows of WorkerPromptRead into the context's
// blocks (kind "block"), in the shape of convo.worker_context's and
// convo.worker_reply's rows (WorkerReplyRow: its zero values, a block with
// no tool call, back to NULL), and its files (kind "file").
func splitPromptRead(read []wdb.WorkerPromptReadRow) ([]wdb.WorkerReplyRow, []wdb.WorkerPromptReadRow) {
	var blocks []wdb.WorkerReplyRow
	var files []wdb.WorkerPromptReadRow
	for _, r := range read {
		switch r.Kind {
		case "block":
			b := wdb.WorkerReplyRow{
				MessageID: r.MessageID, MessagePosition: r.MessagePosition, Role: r.Role,
				BlockType: r.BlockType, Content: r.Content, Metadata: r.Metadata,
			}
			if r.ToolCallID != uuid.Nil {
				b.ToolCallID = uuid.NullUUID{UUID: r.ToolCallID, Valid: true}
				b.ToolName, b.ToolInput, b.ToolStatus, b.ToolOutput = &r.ToolName, r.ToolInput, &r.ToolStatus, &r.ToolOutput
				if r.ToolError != "" {
					b.ToolError = &r.ToolError
				}
			}
			blocks = append(blocks, b)
		case "file":
			files = append(files, r)
		}
	}
	return blocks, files
}
