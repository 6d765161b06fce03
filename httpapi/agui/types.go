package agui

// The AG-UI events and messages convo sends (protocol 1.0, the schemas of
// @ag-ui/core). One type per event, so that a required field is never
// dropped for being empty.

// AG-UI event types.
const (
	runStarted              = "RUN_STARTED"
	runFinished             = "RUN_FINISHED"
	runError                = "RUN_ERROR"
	messagesSnapshot        = "MESSAGES_SNAPSHOT"
	textMessageStart        = "TEXT_MESSAGE_START"
	textMessageContent      = "TEXT_MESSAGE_CONTENT"
	textMessageEnd          = "TEXT_MESSAGE_END"
	reasoningStart          = "REASONING_START"
	reasoningMessageStart   = "REASONING_MESSAGE_START"
	reasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	reasoningMessageEnd     = "REASONING_MESSAGE_END"
	reasoningEnd            = "REASONING_END"
	toolCallStart           = "TOOL_CALL_START"
	toolCallArgs            = "TOOL_CALL_ARGS"
	toolCallEnd             = "TOOL_CALL_END"
	toolCallResult          = "TOOL_CALL_RESULT"
	custom                  = "CUSTOM"
)

// Codes of the RUN_ERROR events convo sends.
const (
	// codePromptFailed: the prompt failed (the message says why).
	codePromptFailed = "PROMPT_FAILED"
	// codeInterrupted: the stream ended before the run did (the
	// server is shutting down, or the client read too slowly); the prompt
	// goes on, and following the conversation again shows the rest.
	codeInterrupted = "STREAM_INTERRUPTED"
	// codeDeleted: the conversation was deleted.
	codeDeleted = "CONVERSATION_DELETED"
)

// metadata is the metadata convo attaches to events and messages, under
// its own key: {"convo": {...}}.
type metadata map[string]any

func convoMeta(fields map[string]string) metadata {
	m := map[string]any{}
	for k, v := range fields {
		if v != "" {
			m[k] = v
		}
	}
	return metadata{"convo": m}
}

type runStartedEvent struct {
	Type      string   `json:"type"`
	Timestamp int64    `json:"timestamp,omitempty"`
	Metadata  metadata `json:"metadata,omitempty"`
	ThreadID  string   `json:"threadId"`
	RunID     string   `json:"runId"`
}

type runOutcome struct {
	Type string `json:"type"` // "success", "interrupt" or "cancelled"
	// PendingToolCallIds (success) are the frontend tools (client tools)
	// the run left for the client to answer in the next input's messages.
	PendingToolCallIDs []string `json:"pendingToolCallIds,omitempty"`
	// Interrupts (interrupt) are the approvals and questions the run waits
	// for, answered by the next input's resume entries.
	Interrupts []interrupt `json:"interrupts,omitempty"`
}

// interrupt is an approval or a question a run waits for: id and
// toolCallId are convo's tool call id, reason the request's kind.
type interrupt struct {
	ID         string         `json:"id"`
	Reason     string         `json:"reason"`
	Message    string         `json:"message,omitempty"`
	ToolCallID string         `json:"toolCallId"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

type runFinishedEvent struct {
	Type      string      `json:"type"`
	Timestamp int64       `json:"timestamp,omitempty"`
	ThreadID  string      `json:"threadId"`
	RunID     string      `json:"runId"`
	Outcome   *runOutcome `json:"outcome,omitempty"`
}

type runErrorEvent struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`
	Message   string `json:"message"`
	Code      string `json:"code,omitempty"`
}

type messagesSnapshotEvent struct {
	Type      string    `json:"type"`
	Timestamp int64     `json:"timestamp,omitempty"`
	Messages  []message `json:"messages"`
}

// messageEvent is TEXT_MESSAGE_START/END, REASONING_START/END and
// REASONING_MESSAGE_START/END: a message id, and a role on the starts.
type messageEvent struct {
	Type      string   `json:"type"`
	Timestamp int64    `json:"timestamp,omitempty"`
	Metadata  metadata `json:"metadata,omitempty"`
	MessageID string   `json:"messageId"`
	Role      string   `json:"role,omitempty"`
}

// contentEvent is TEXT_MESSAGE_CONTENT and REASONING_MESSAGE_CONTENT.
type contentEvent struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
}

type toolCallStartEvent struct {
	Type            string `json:"type"`
	Timestamp       int64  `json:"timestamp,omitempty"`
	ToolCallID      string `json:"toolCallId"`
	ToolCallName    string `json:"toolCallName"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
}

type toolCallArgsEvent struct {
	Type       string `json:"type"`
	Timestamp  int64  `json:"timestamp,omitempty"`
	ToolCallID string `json:"toolCallId"`
	Delta      string `json:"delta"`
}

type toolCallEndEvent struct {
	Type       string `json:"type"`
	Timestamp  int64  `json:"timestamp,omitempty"`
	ToolCallID string `json:"toolCallId"`
}

type toolCallResultEvent struct {
	Type       string `json:"type"`
	Timestamp  int64  `json:"timestamp,omitempty"`
	MessageID  string `json:"messageId"`
	ToolCallID string `json:"toolCallId"`
	Content    string `json:"content"`
	Role       string `json:"role"`
}

type customEvent struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`
	Name      string `json:"name"`
	Value     any    `json:"value"`
}

// message is one message of MESSAGES_SNAPSHOT: user, system,
// assistant, reasoning or tool.
type message struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// Content is required for every role but assistant: a string, or
	// for a user message that holds files []any of textPart and
	// mediaPart (contentOf).
	Content    any        `json:"content,omitempty"`
	ToolCalls  []toolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	Error      string     `json:"error,omitempty"`
	Metadata   metadata   `json:"metadata,omitempty"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// textPart is a text part of a message's content.
type textPart struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// mediaPart is an image, audio, video or document part of a message's
// content.
type mediaPart struct {
	Type     string         `json:"type"`
	Source   partSource     `json:"source"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// partSource is where a media part's bytes are: "url" (a file's signed
// URL), or, in input, "data" (base64) or "file" (a convo file id).
type partSource struct {
	Type     string `json:"type"`
	Value    string `json:"value"`
	MimeType string `json:"mimeType,omitempty"`
}
