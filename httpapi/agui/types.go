package agui

// The AG-UI events and messages convo sends (protocol 1.0, the schemas of
// @ag-ui/core). One type per event, so that a required field is never
// dropped for being empty.

// AG-UI event types.
const (
	aguiRunStarted              = "RUN_STARTED"
	aguiRunFinished             = "RUN_FINISHED"
	aguiRunError                = "RUN_ERROR"
	aguiMessagesSnapshot        = "MESSAGES_SNAPSHOT"
	aguiTextMessageStart        = "TEXT_MESSAGE_START"
	aguiTextMessageContent      = "TEXT_MESSAGE_CONTENT"
	aguiTextMessageEnd          = "TEXT_MESSAGE_END"
	aguiReasoningStart          = "REASONING_START"
	aguiReasoningMessageStart   = "REASONING_MESSAGE_START"
	aguiReasoningMessageContent = "REASONING_MESSAGE_CONTENT"
	aguiReasoningMessageEnd     = "REASONING_MESSAGE_END"
	aguiReasoningEnd            = "REASONING_END"
	aguiToolCallStart           = "TOOL_CALL_START"
	aguiToolCallArgs            = "TOOL_CALL_ARGS"
	aguiToolCallEnd             = "TOOL_CALL_END"
	aguiToolCallResult          = "TOOL_CALL_RESULT"
	aguiCustom                  = "CUSTOM"
)

// Codes of the RUN_ERROR events convo sends.
const (
	// aguiCodePromptFailed: the prompt failed (the message says why).
	aguiCodePromptFailed = "PROMPT_FAILED"
	// aguiCodeInterrupted: the stream ended before the run did (the
	// server is shutting down, or the client read too slowly); the prompt
	// goes on, and following the conversation again shows the rest.
	aguiCodeInterrupted = "STREAM_INTERRUPTED"
	// aguiCodeDeleted: the conversation was deleted.
	aguiCodeDeleted = "CONVERSATION_DELETED"
)

// aguiMeta is the metadata convo attaches to events and messages, under
// its own key: {"convo": {...}}.
type aguiMeta map[string]any

func convoMeta(fields map[string]string) aguiMeta {
	m := map[string]any{}
	for k, v := range fields {
		if v != "" {
			m[k] = v
		}
	}
	return aguiMeta{"convo": m}
}

type aguiRunStartedEvent struct {
	Type      string   `json:"type"`
	Timestamp int64    `json:"timestamp,omitempty"`
	Metadata  aguiMeta `json:"metadata,omitempty"`
	ThreadID  string   `json:"threadId"`
	RunID     string   `json:"runId"`
}

type aguiOutcome struct {
	Type string `json:"type"` // "success" or "cancelled"
}

type aguiRunFinishedEvent struct {
	Type      string       `json:"type"`
	Timestamp int64        `json:"timestamp,omitempty"`
	ThreadID  string       `json:"threadId"`
	RunID     string       `json:"runId"`
	Outcome   *aguiOutcome `json:"outcome,omitempty"`
}

type aguiRunErrorEvent struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`
	Message   string `json:"message"`
	Code      string `json:"code,omitempty"`
}

type aguiMessagesSnapshotEvent struct {
	Type      string        `json:"type"`
	Timestamp int64         `json:"timestamp,omitempty"`
	Messages  []aguiMessage `json:"messages"`
}

// aguiMessageEvent is TEXT_MESSAGE_START/END, REASONING_START/END and
// REASONING_MESSAGE_START/END: a message id, and a role on the starts.
type aguiMessageEvent struct {
	Type      string   `json:"type"`
	Timestamp int64    `json:"timestamp,omitempty"`
	Metadata  aguiMeta `json:"metadata,omitempty"`
	MessageID string   `json:"messageId"`
	Role      string   `json:"role,omitempty"`
}

// aguiContentEvent is TEXT_MESSAGE_CONTENT and REASONING_MESSAGE_CONTENT.
type aguiContentEvent struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
}

type aguiToolCallStartEvent struct {
	Type            string `json:"type"`
	Timestamp       int64  `json:"timestamp,omitempty"`
	ToolCallID      string `json:"toolCallId"`
	ToolCallName    string `json:"toolCallName"`
	ParentMessageID string `json:"parentMessageId,omitempty"`
}

type aguiToolCallArgsEvent struct {
	Type       string `json:"type"`
	Timestamp  int64  `json:"timestamp,omitempty"`
	ToolCallID string `json:"toolCallId"`
	Delta      string `json:"delta"`
}

type aguiToolCallEndEvent struct {
	Type       string `json:"type"`
	Timestamp  int64  `json:"timestamp,omitempty"`
	ToolCallID string `json:"toolCallId"`
}

type aguiToolCallResultEvent struct {
	Type       string `json:"type"`
	Timestamp  int64  `json:"timestamp,omitempty"`
	MessageID  string `json:"messageId"`
	ToolCallID string `json:"toolCallId"`
	Content    string `json:"content"`
	Role       string `json:"role"`
}

type aguiCustomEvent struct {
	Type      string `json:"type"`
	Timestamp int64  `json:"timestamp,omitempty"`
	Name      string `json:"name"`
	Value     any    `json:"value"`
}

// aguiMessage is one message of MESSAGES_SNAPSHOT: user, system,
// assistant, reasoning or tool.
type aguiMessage struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// Content is required for every role but assistant.
	Content    *string        `json:"content,omitempty"`
	ToolCalls  []aguiToolCall `json:"toolCalls,omitempty"`
	ToolCallID string         `json:"toolCallId,omitempty"`
	Error      string         `json:"error,omitempty"`
	Metadata   aguiMeta       `json:"metadata,omitempty"`
}

type aguiToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"` // "function"
	Function aguiFunctionCall `json:"function"`
}

type aguiFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
