package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/worker/internal/wdb"
)

// errWaiting ends a run whose prompt now waits for a person: it is
// parked (convo.wait_prompt), and the worker lets it go.
var errWaiting = errors.New("the prompt waits for input")

// pauseFor says whether the model's call of name with input waits for a
// person, what it asks (see registeredTool.pause), and when the request
// expires (the tool's InputExpiry, else Config.InputExpiry; nil: never).
// A call of an unknown tool, or with arguments its schema refuses, does
// not wait: it fails at once, as any call does.
func (r *run) pauseFor(name string, input json.RawMessage) (string, json.RawMessage, *time.Time) {
	tool, ok := r.tools.lookup(name)
	if !ok || validateArgs(r.ctx, tool.schema, input) != nil {
		return "", nil, nil
	}
	kind, request := tool.pause(input)
	expiry := tool.InputExpiry
	if expiry <= 0 {
		expiry = r.p.cfg.InputExpiry
	}
	if kind == "" || expiry <= 0 {
		return kind, request, nil
	}
	at := time.Now().Add(expiry)
	return kind, request, &at
}

// inputAnswer is an input request's answer (convo.answer_input), or the
// denial its expiry wrote.
type inputAnswer struct {
	Approved *bool   `json:"approved"`
	Reason   string  `json:"reason"`
	Output   *string `json:"output"`
	Error    string  `json:"error"`
	Answer   *string `json:"answer"`
}

// resume acts on the answers of a prompt that waited for input, and
// returns the reply so far as the model's context: its blocks (text, tool
// calls and their results), each answered call completed or failed by its
// answer, with a tool_result block that the model reads. An approved call
// runs now; a denied one fails with the reason; a client tool's output or
// error and a question's answer complete or fail the call.
func (r *run) resume() ([]Message, error) {
	var inputs []wdb.WorkerInputsRow
	var rows []wdb.WorkerReplyRow
	if err := r.call("read the reply so far and its answers", func(ctx context.Context) error {
		var err error
		held := wdb.WorkerInputsParams{PromptID: r.claim.PromptID, Worker: r.worker}
		if inputs, err = r.p.api.WorkerInputs(ctx, held); err != nil {
			return err
		}
		rows, err = r.p.api.WorkerReply(ctx, wdb.WorkerReplyParams(held))
		return err
	}); err != nil {
		return nil, err
	}
	blocks := make([]wdb.WorkerReplyRow, 0, len(rows)+len(inputs))
	callIDs := map[uuid.UUID]string{} // the model's id of each call, from its tool_use block
	for _, b := range rows {
		blocks = append(blocks, b)
		if b.ToolCallID.Valid {
			var meta struct {
				CallID string `json:"callId"`
			}
			_ = json.Unmarshal(b.Metadata, &meta)
			callIDs[b.ToolCallID.UUID] = meta.CallID
		}
	}
	// The results go after the reply's last tool block, before any text
	// the model streamed after its calls in that round: that text then
	// reads as the next turn, as it would after the results.
	at := len(blocks)
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].BlockType == "tool_use" || blocks[i].BlockType == "tool_result" {
			at = i + 1
			break
		}
	}
	var results []wdb.WorkerReplyRow
	for _, in := range inputs {
		// A call already ended was acted on (in an earlier resume, or it
		// was cancelled): its blocks say what happened.
		if in.ToolCallStatus != "started" || (in.Status != "answered" && in.Status != "expired") {
			continue
		}
		c := &pendingCall{toolCallID: in.ToolCallID, id: callIDs[in.ToolCallID], name: in.Name, input: in.Input, inputKind: in.Kind}
		result, err := r.actOn(c, in)
		if err != nil {
			return nil, err
		}
		meta, _ := json.Marshal(map[string]string{"toolCallId": in.ToolCallID.String()})
		results = append(results, wdb.WorkerReplyRow{
			MessageID: r.claim.MessageID, Role: string(RoleAssistant), BlockType: "tool_result", Content: result, Metadata: meta,
		})
	}
	return assistantHistory(slices.Insert(blocks, at, results...)), nil
}

// actOn ends a call that waited for input as its answer says, writes its
// tool_result block, and returns what the model is told.
func (r *run) actOn(c *pendingCall, in wdb.WorkerInputsRow) (string, error) {
	var a inputAnswer
	if err := json.Unmarshal(in.Answer, &a); err != nil {
		return "", fmt.Errorf("read the answer to tool call %s: %w", c.toolCallID, err)
	}
	meta := map[string]any{"toolCallId": c.toolCallID.String(), "callId": c.id, "tool": c.name, "inputKind": in.Kind}
	switch in.Kind {
	case inputApproval:
		if a.Approved != nil && *a.Approved {
			return r.runTool(c)
		}
		reason := "denied by the user"
		if in.Status == "expired" {
			reason = "denied"
		}
		if a.Reason != "" {
			reason += ": " + a.Reason
		}
		return r.endCall(c, meta, "", reason)
	case inputClientTool:
		if a.Output != nil {
			return r.endCall(c, meta, *a.Output, "")
		}
		return r.endCall(c, meta, "", orText(a.Error, "the client tool failed without saying why"))
	case inputQuestion:
		if a.Answer != nil {
			return r.endCall(c, meta, *a.Answer, "")
		}
		return r.endCall(c, meta, "", orText(a.Error, "the question was not answered"))
	}
	return "", fmt.Errorf("tool call %s waited for input of an unknown kind %q", c.toolCallID, in.Kind)
}

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
