package aisdk

import "encoding/json"

// The AI SDK's UI message stream, protocol v1 (the response header
// x-vercel-ai-ui-message-stream: v1), as the npm package ai 7.0.173
// defines it (uiMessageChunkSchema): each chunk one SSE "data:" line of
// JSON, the stream closed by "data: [DONE]". One type per chunk shape, so
// that a required field is never dropped for being empty.

// uiStreamHeader and uiStreamVersion name the protocol on every stream.
const (
	uiStreamHeader  = "X-Vercel-AI-UI-Message-Stream"
	uiStreamVersion = "v1"
	uiStreamDone    = "[DONE]"
)

// Chunk types convo sends.
const (
	uiStart              = "start"
	uiStartStep          = "start-step"
	uiFinishStep         = "finish-step"
	uiTextStart          = "text-start"
	uiTextDelta          = "text-delta"
	uiTextEnd            = "text-end"
	uiReasoningStart     = "reasoning-start"
	uiReasoningDelta     = "reasoning-delta"
	uiReasoningEnd       = "reasoning-end"
	uiToolInputStart     = "tool-input-start"
	uiToolInputDelta     = "tool-input-delta"
	uiToolInputAvailable = "tool-input-available"
	uiToolOutputAvail    = "tool-output-available"
	uiToolOutputError    = "tool-output-error"
	uiToolApprovalReq    = "tool-approval-request"
	uiToolApprovalResp   = "tool-approval-response"
	uiToolOutputDenied   = "tool-output-denied"
	uiError              = "error"
	uiAbort              = "abort"
	uiFinish             = "finish"
)

// Finish reasons (the protocol's FinishReason).
const (
	uiFinishStop  = "stop"
	uiFinishError = "error"
	// uiFinishPause ends a reply's stream where its prompt waits for a
	// person's input (an approval, a client tool's output, an answer).
	uiFinishPause = "tool-calls"
)

// uiTypeOnly is start-step and finish-step.
type uiTypeOnly struct {
	Type string `json:"type"`
}

type uiStartChunk struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
}

// uiPartChunk is text-start/end and reasoning-start/end.
type uiPartChunk struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// uiDeltaChunk is text-delta and reasoning-delta.
type uiDeltaChunk struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Delta string `json:"delta"`
}

// uiToolInputStartChunk opens a tool part. convo's tools run on its
// workers, unknown to the client: every tool part is dynamic and
// provider-executed (the client's onToolCall is not asked to run it).
type uiToolInputStartChunk struct {
	Type             string `json:"type"`
	ToolCallID       string `json:"toolCallId"`
	ToolName         string `json:"toolName"`
	Dynamic          bool   `json:"dynamic"`
	ProviderExecuted bool   `json:"providerExecuted"`
}

type uiToolInputDeltaChunk struct {
	Type           string `json:"type"`
	ToolCallID     string `json:"toolCallId"`
	InputTextDelta string `json:"inputTextDelta"`
}

type uiToolInputAvailableChunk struct {
	Type             string          `json:"type"`
	ToolCallID       string          `json:"toolCallId"`
	ToolName         string          `json:"toolName"`
	Input            json.RawMessage `json:"input"`
	Dynamic          bool            `json:"dynamic"`
	ProviderExecuted bool            `json:"providerExecuted"`
}

// uiToolInputAskChunk is a tool-input-available that hands a tool part
// to the client: a client tool's run or a question, not provider-executed
// (so useChat's onToolCall runs and addToolOutput answers), its
// toolMetadata naming what is asked ({"convoInput": {"kind", "request"}}).
type uiToolInputAskChunk struct {
	Type             string          `json:"type"`
	ToolCallID       string          `json:"toolCallId"`
	ToolName         string          `json:"toolName"`
	Input            json.RawMessage `json:"input"`
	Dynamic          bool            `json:"dynamic"`
	ProviderExecuted bool            `json:"providerExecuted"`
	ToolMetadata     map[string]any  `json:"toolMetadata"`
}

// uiToolApprovalRequestChunk asks for an approval: approvalId is convo's
// tool call id (what AnswerInput names), toolCallId the tool part's.
type uiToolApprovalRequestChunk struct {
	Type       string `json:"type"`
	ApprovalID string `json:"approvalId"`
	ToolCallID string `json:"toolCallId"`
	Reason     string `json:"reason,omitempty"`
}

type uiToolApprovalResponseChunk struct {
	Type       string `json:"type"`
	ApprovalID string `json:"approvalId"`
	Approved   bool   `json:"approved"`
	Reason     string `json:"reason,omitempty"`
}

type uiToolOutputDeniedChunk struct {
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
}

type uiToolOutputAvailableChunk struct {
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
	Output     string `json:"output"`
}

type uiToolOutputErrorChunk struct {
	Type       string `json:"type"`
	ToolCallID string `json:"toolCallId"`
	ErrorText  string `json:"errorText"`
}

// uiDataChunk is a data-* chunk: a structured block as data-structured
// (its JSON), any other block type as data-<type> ({content, metadata}).
type uiDataChunk struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Data any    `json:"data"`
}

type uiErrorChunk struct {
	Type      string `json:"type"`
	ErrorText string `json:"errorText"`
}

type uiAbortChunk struct {
	Type   string `json:"type"`
	Reason string `json:"reason,omitempty"`
}

type uiFinishChunk struct {
	Type         string `json:"type"`
	FinishReason string `json:"finishReason"`
	// MessageMetadata, for a failed reply, is {"error": why}: useChat
	// keeps it on the message, as /messages serves it after a reload.
	MessageMetadata *uiMessageMetadata `json:"messageMetadata,omitempty"`
}

// uiMessage is a UIMessage (GET /v1/ai-sdk/chat/{id}/messages), its parts
// shaped exactly as the ai package's stream reader builds them from the
// chunks convo sends.
type uiMessage struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []any  `json:"parts"`
	// Metadata is UIMessage.metadata: for a failed reply, {"error": why}
	// (its prompt's error), which the stream's error chunk said live.
	Metadata *uiMessageMetadata `json:"metadata,omitempty"`
}

// uiMessageMetadata is the metadata convo gives a loaded UIMessage.
type uiMessageMetadata struct {
	Error string `json:"error,omitempty"`
}

type uiTextPart struct {
	Type  string `json:"type"` // "text"
	Text  string `json:"text"`
	State string `json:"state,omitempty"` // assistant parts: "streaming" or "done"
}

type uiReasoningPart struct {
	Type  string `json:"type"` // "reasoning"
	ID    string `json:"id"`
	Text  string `json:"text"`
	State string `json:"state"`
}

type uiStepStartPart struct {
	Type string `json:"type"` // "step-start"
}

// uiToolPart is a dynamic-tool part.
type uiToolPart struct {
	Type             string          `json:"type"` // "dynamic-tool"
	ToolName         string          `json:"toolName"`
	ToolCallID       string          `json:"toolCallId"`
	State            string          `json:"state"`
	Input            json.RawMessage `json:"input,omitempty"`
	Output           *string         `json:"output,omitempty"`
	ErrorText        string          `json:"errorText,omitempty"`
	ProviderExecuted bool            `json:"providerExecuted"`
	ToolMetadata     map[string]any  `json:"toolMetadata,omitempty"`
	Approval         *uiApproval     `json:"approval,omitempty"`
}

// uiApproval is a tool part's approval, as the stream's
// tool-approval-request and tool-approval-response chunks build it.
type uiApproval struct {
	ID            string `json:"id"`
	RequestReason string `json:"requestReason,omitempty"`
	Approved      *bool  `json:"approved,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// uiFilePart is a FileUIPart: a file a user message holds.
type uiFilePart struct {
	Type      string `json:"type"` // "file"
	MediaType string `json:"mediaType"`
	Filename  string `json:"filename,omitempty"`
	URL       string `json:"url"`
}
