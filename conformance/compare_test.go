package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/connectapi"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/postgres"
)

// client reads conversations as clients do: through the Connect API's
// handler, served in-process on the scenario's database, so that a
// runtime passes only when what users read is right.
type client struct {
	api convov1connect.ConversationServiceClient
}

func newClient(t *testing.T, store *postgres.Store) *client {
	t.Helper()
	path, handler := connectapi.NewHandler(connectapi.Options{Store: store})
	mux := http.NewServeMux()
	mux.Handle(path, handler)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &client{api: convov1connect.NewConversationServiceClient(srv.Client(), srv.URL)}
}

// message returns the reply's assistant message as GetConversation gives
// it.
func (c *client) message(t *testing.T, r reply) *convov1.Message {
	t.Helper()
	res, err := c.api.GetConversation(context.Background(), connect.NewRequest(&convov1.GetConversationRequest{ConversationId: r.conversationID.String()}))
	if err != nil {
		t.Fatalf("GetConversation: %v", err)
	}
	for _, m := range res.Msg.GetMessages() {
		if m.GetId() == r.messageID.String() {
			return m
		}
	}
	t.Fatalf("GetConversation of %s has no message %s", r.conversationID, r.messageID)
	return nil
}

// prompt returns the prompt as GetTrace gives it: its status and error.
func (c *client) prompt(t *testing.T, promptID fmt.Stringer) *convov1.Prompt {
	t.Helper()
	res, err := c.api.GetTrace(context.Background(), connect.NewRequest(&convov1.GetTraceRequest{Target: &convov1.GetTraceRequest_PromptId{PromptId: promptID.String()}}))
	if err != nil {
		t.Fatalf("GetTrace: %v", err)
	}
	return res.Msg.GetTrace().GetPrompt()
}

// compare checks the reply against want, reporting every difference with
// the expected and the actual blocks side by side.
func (c *client) compare(t *testing.T, what string, r reply, want Expect) {
	t.Helper()
	p := c.prompt(t, r.promptID)
	msg := c.message(t, r)
	var problems []string
	if p.GetStatus() != want.Status {
		problems = append(problems, fmt.Sprintf("the prompt is %s, want %s", p.GetStatus(), want.Status))
	}
	if msg.GetStatus() != p.GetStatus() {
		problems = append(problems, fmt.Sprintf("the message is %s, its prompt %s", msg.GetStatus(), p.GetStatus()))
	}
	if want.Error != "" && !strings.Contains(p.GetError(), want.Error) {
		problems = append(problems, fmt.Sprintf("the prompt's error is %q, want it to contain %q", p.GetError(), want.Error))
	}
	got := msg.GetBlocks()
	for i := range max(len(got), len(want.Blocks)) {
		switch {
		case i >= len(want.Blocks):
			problems = append(problems, fmt.Sprintf("block %d: unexpected %s", i, describeGot(got[i])))
		case i >= len(got):
			problems = append(problems, fmt.Sprintf("block %d: missing %s", i, describeWant(want.Blocks[i])))
		default:
			if d := blockDiff(want.Blocks[i], got[i]); d != "" {
				problems = append(problems, fmt.Sprintf("block %d: %s", i, d))
			}
		}
	}
	if len(problems) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (conversation %s, prompt %s):\n", what, r.conversationID, r.promptID)
	for _, pr := range problems {
		fmt.Fprintf(&b, "  - %s\n", pr)
	}
	fmt.Fprintf(&b, "expected: %s", want.Status)
	if want.Error != "" {
		fmt.Fprintf(&b, ", error containing %q", want.Error)
	}
	b.WriteString("\n")
	for i, w := range want.Blocks {
		fmt.Fprintf(&b, "  [%d] %s\n", i, describeWant(w))
	}
	fmt.Fprintf(&b, "got: %s", p.GetStatus())
	if p.GetError() != "" {
		fmt.Fprintf(&b, ", error %q", p.GetError())
	}
	b.WriteString("\n")
	for i, g := range got {
		fmt.Fprintf(&b, "  [%d] %s\n", i, describeGot(g))
	}
	t.Error(b.String())
}

// blockDiff says how got differs from want, or "".
func blockDiff(want ExpectBlock, got *convov1.Block) string {
	var d []string
	if got.GetBlockType() != want.Type {
		d = append(d, fmt.Sprintf("type %s, want %s", got.GetBlockType(), want.Type))
	}
	if got.GetStatus() != "completed" {
		d = append(d, fmt.Sprintf("status %s: every block must be ended", got.GetStatus()))
	}
	if want.Type == "tool_use" {
		if want.Content != "" && !sameJSON(want.Content, got.GetContent()) {
			d = append(d, fmt.Sprintf("content (argument JSON) %s, want %s", got.GetContent(), want.Content))
		}
	} else if got.GetContent() != want.Content {
		d = append(d, fmt.Sprintf("content %q, want %q", got.GetContent(), want.Content))
	}
	if w := want.ToolCall; w != nil {
		g := got.GetToolCall()
		switch {
		case g == nil:
			d = append(d, "no tool call")
		default:
			input, _ := protojson.Marshal(g.GetInput())
			if g.GetName() != w.Name {
				d = append(d, fmt.Sprintf("tool %s, want %s", g.GetName(), w.Name))
			}
			if !sameJSON(string(w.Input), string(input)) {
				d = append(d, fmt.Sprintf("tool input %s, want %s", input, w.Input))
			}
			if g.GetStatus() != w.Status {
				d = append(d, fmt.Sprintf("tool call %s, want %s", g.GetStatus(), w.Status))
			}
			if g.GetOutput() != w.Output {
				d = append(d, fmt.Sprintf("tool output %q, want %q", g.GetOutput(), w.Output))
			}
			if !strings.Contains(g.GetError(), w.Error) || (w.Error == "" && g.GetError() != "") {
				d = append(d, fmt.Sprintf("tool error %q, want %q", g.GetError(), w.Error))
			}
		}
	}
	return strings.Join(d, "; ")
}

func sameJSON(a, b string) bool {
	var va, vb any
	return json.Unmarshal([]byte(a), &va) == nil && json.Unmarshal([]byte(b), &vb) == nil && reflect.DeepEqual(va, vb)
}

func describeWant(w ExpectBlock) string {
	s := fmt.Sprintf("%s %q", w.Type, w.Content)
	if tc := w.ToolCall; tc != nil {
		s += fmt.Sprintf(" call %s(%s) %s", tc.Name, tc.Input, tc.Status)
		if tc.Output != "" {
			s += fmt.Sprintf(" output %q", tc.Output)
		}
		if tc.Error != "" {
			s += fmt.Sprintf(" error %q", tc.Error)
		}
	}
	return s
}

func describeGot(g *convov1.Block) string {
	s := fmt.Sprintf("%s %q", g.GetBlockType(), g.GetContent())
	if g.GetStatus() != "completed" {
		s += " (" + g.GetStatus() + ")"
	}
	if tc := g.GetToolCall(); tc != nil {
		input, _ := protojson.Marshal(tc.GetInput())
		s += fmt.Sprintf(" call %s(%s) %s", tc.GetName(), input, tc.GetStatus())
		if tc.GetOutput() != "" {
			s += fmt.Sprintf(" output %q", tc.GetOutput())
		}
		if tc.GetError() != "" {
			s += fmt.Sprintf(" error %q", tc.GetError())
		}
	}
	return s
}
