package openai

import "encoding/json"

// response is OpenAI's Response object, as GET /v1/responses/{id} and the
// events that carry one have it.
type response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *responseError    `json:"error"`
	IncompleteDetails  *json.RawMessage  `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	Metadata           map[string]string `json:"metadata"`
	Model              string            `json:"model"`
	Output             []outputItem      `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       *conversationRef  `json:"conversation"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Text               json.RawMessage   `json:"text"`
	Usage              *json.RawMessage  `json:"usage"`
	// OutputText is the text of every output_text part, joined: the
	// SDKs' output_text convenience, sent so that a client without one
	// has it too.
	OutputText string `json:"output_text"`
}

// The statuses of a Response.
const (
	statusQueued     = "queued"
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusFailed     = "failed"
	statusCancelled  = "cancelled"
	statusIncomplete = "incomplete"
)

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type conversationRef struct {
	ID string `json:"id"`
}

// outputItem is a message (a text block) or a reasoning item (a
// reasoning block).
type outputItem struct {
	Type    string        `json:"type"`
	ID      string        `json:"id"`
	Status  string        `json:"status"`
	Role    string        `json:"role,omitempty"`
	Summary *[]string     `json:"summary,omitempty"`
	Content []contentPart `json:"content"`
	// A function_call's or an mcp_approval_request's fields (its
	// MarshalJSON, in foldtools.go, writes such an item).
	CallID, Name, ServerLabel string  `json:"-"`
	Arguments                 *string `json:"-"`
	// raw, when set, is the item's JSON (an input item of a
	// continuation: a function_call_output, an mcp_approval_response).
	raw []byte
}

// contentPart is an output_text part (of a message), a reasoning_text
// part (of a reasoning item), or a user message's input_text,
// input_image or input_file part (the last two a file, files.go).
type contentPart struct {
	Type        string             `json:"type"`
	Text        string             `json:"text"`
	Annotations *[]json.RawMessage `json:"annotations,omitempty"`
	Logprobs    *[]json.RawMessage `json:"logprobs,omitempty"`
	// file is the file of an input_image or input_file part.
	file *fileFields
}

// streamEvent is one event of a response's stream: Type and
// SequenceNumber always, the rest as Type has them.
type streamEvent struct {
	Type           string       `json:"type"`
	SequenceNumber int64        `json:"sequence_number"`
	Response       *response    `json:"response,omitempty"`
	OutputIndex    *int         `json:"output_index,omitempty"`
	ItemID         string       `json:"item_id,omitempty"`
	ContentIndex   *int         `json:"content_index,omitempty"`
	Item           *outputItem  `json:"item,omitempty"`
	Part           *contentPart `json:"part,omitempty"`
	Delta          *string      `json:"delta,omitempty"`
	Text           *string      `json:"text,omitempty"`
	Arguments      *string      `json:"arguments,omitempty"`
	Logprobs       *[]string    `json:"logprobs,omitempty"`
}

// errorEvent is the "error" event: the one payload with a top-level
// error member, which the SDKs raise.
type errorEvent struct {
	Type           string  `json:"type"`
	SequenceNumber int64   `json:"sequence_number"`
	Code           string  `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
	Error          struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}
