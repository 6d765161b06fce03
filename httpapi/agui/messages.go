package agui

import (
	"encoding/json"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
	"github.com/convo-dev/convo/wire/view"
)

// messagesOf is the conversation as AG-UI messages (MESSAGES_SNAPSHOT),
// built the way a client's reducer builds them from the live events (see
// translator): only completed blocks, and none whose events are still
// queued (queued names them).
func messagesOf(c *view.Conversation, queued map[string]bool) []message {
	out := []message{}
	for _, m := range c.Messages {
		switch m.Role {
		case "user", "system":
			out = append(out, message{ID: m.ID, Role: m.Role, Content: contentOf(m)})
		case "assistant":
			out = assistant(out, m, queued)
		}
	}
	return out
}

// contentOf is a user's (or system) message's content: its text, or
// for a message that holds files AG-UI's content parts: the text (when
// there is some), then one media part per file, image, audio, video or
// document by its media type, its source the file's signed URL and its
// metadata the file's convo id, name and size (docs/files.md).
func contentOf(m *view.Message) any {
	var text strings.Builder
	var files []*convov1.File
	for _, b := range m.Blocks {
		switch b.Kind {
		case view.Text:
			text.WriteString(b.Content())
		case view.File:
			if b.File != nil {
				files = append(files, b.File)
			}
		}
	}
	if len(files) == 0 {
		return text.String()
	}
	parts := []any{}
	if text.Len() > 0 {
		parts = append(parts, textPart{Type: "text", Text: text.String()})
	}
	for _, f := range files {
		parts = append(parts, mediaPart{Type: mediaPartType(f.GetMediaType()),
			Source:   partSource{Type: "url", Value: f.GetUrl(), MimeType: f.GetMediaType()},
			Metadata: map[string]any{"convo": map[string]any{"fileId": f.GetId(), "filename": f.GetFilename(), "size": f.GetSize()}}})
	}
	return parts
}

// mediaPartType is the AG-UI part a file of mediaType is.
func mediaPartType(mediaType string) string {
	for _, kind := range []string{"image", "audio", "video"} {
		if strings.HasPrefix(mediaType, kind+"/") {
			return kind
		}
	}
	return "document"
}

// assistant appends an assistant message's AG-UI messages: one per text or
// structured block (its id the block's), one reasoning message per
// reasoning block, and the message's tool calls in one assistant message
// with the convo message's id, each answered tool call followed by its
// tool message.
func assistant(out []message, m *view.Message, queued map[string]bool) []message {
	carrier := -1
	for _, b := range m.Blocks {
		if !b.Completed || queued[b.ID] {
			continue
		}
		switch shownAs(b.Kind) {
		case blockText:
			out = append(out, message{ID: b.ID, Role: "assistant", Content: ptr(b.Content()),
				Metadata: blockMeta(m.ID, b.Type)})
		case blockReasoning:
			out = append(out, message{ID: b.ID, Role: "reasoning", Content: ptr(b.Content()),
				Metadata: blockMeta(m.ID, b.Type)})
		case blockToolUse:
			if carrier < 0 {
				carrier = len(out)
				out = append(out, message{ID: m.ID, Role: "assistant"})
			}
			callID, name := b.ID, wire.MetadataString(b.Metadata, "name")
			if b.Call != nil {
				callID, name = b.Call.Id, b.Call.Name
			}
			out[carrier].ToolCalls = append(out[carrier].ToolCalls, toolCall{ID: callID, Type: "function",
				Function: functionCall{Name: wire.ToolName(name), Arguments: toolArguments(b.Content(), b.Input)}})
			if b.Call == nil || (b.Call.Status != "completed" && b.Call.Status != "failed") {
				continue
			}
			// After the carrier and the tool messages already there, as a
			// client's reducer places TOOL_CALL_RESULT.
			at := carrier + 1
			for at < len(out) && out[at].Role == "tool" {
				at++
			}
			content, errText := toolResult(b.Output(), b.Call)
			out = slices.Insert(out, at, message{ID: b.Call.Id, Role: "tool", ToolCallID: b.Call.Id,
				Content: ptr(content), Error: errText})
		}
	}
	return out
}

// blockKind is how a block kind (view.Kind) shows in AG-UI.
type blockKind int

const (
	blockOther     blockKind = iota // a CUSTOM event at its end
	blockText                       // TEXT_MESSAGE_*
	blockReasoning                  // REASONING_*
	blockToolUse                    // TOOL_CALL_*
	blockSkipped                    // nothing: tool_result (TOOL_CALL_RESULT carries the output)
)

func shownAs(k view.Kind) blockKind {
	switch k {
	case view.Text, view.Structured:
		return blockText
	case view.Reasoning:
		return blockReasoning
	case view.ToolUse:
		return blockToolUse
	case view.ToolResult:
		return blockSkipped
	}
	return blockOther
}

// blockMeta is the metadata of an AG-UI message made from a block: the
// convo message it belongs to and the block's type.
func blockMeta(messageID, blockType string) metadata {
	return convoMeta(map[string]string{"messageId": messageID, "blockType": blockType})
}

// toolArguments is a tool call's argument text: the tool_use block's
// content (the argument deltas), or, when the worker streamed none, the
// call's input as JSON.
func toolArguments(content string, input *structpb.Value) string {
	if content != "" || input == nil {
		return content
	}
	b, err := json.Marshal(input.AsInterface())
	if err != nil {
		return ""
	}
	return string(b)
}

// toolResult is the content of an ended tool call's AG-UI tool message:
// its output, and for a failed call the error after it.
func toolResult(output string, call *convov1.ToolCall) (content, errText string) {
	if call.Status != "failed" {
		return output, ""
	}
	if output != "" {
		output += "\n"
	}
	return output + "error: " + call.Error, call.Error
}

func ptr[T any](v T) *T { return &v }
