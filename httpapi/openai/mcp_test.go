package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// toolCalls are the tool calls of the conversation's last message, as
// the store (and so GetConversation) has them.
func toolCalls(t *testing.T, tb *apitest.Bundle, conv uuid.UUID) []*conversation.ToolCall {
	t.Helper()
	st := tb.State(t, "alice", conv)
	var out []*conversation.ToolCall
	for _, b := range st.Messages[len(st.Messages)-1].Blocks {
		if b.ToolCall != nil {
			out = append(out, b.ToolCall)
		}
	}
	return out
}

// mcpCalls are the response's mcp_call items.
func mcpCalls(resp *responses.Response) []responses.ResponseOutputItemMcpCall {
	var out []responses.ResponseOutputItemMcpCall
	for _, o := range resp.Output {
		if o.Type == "mcp_call" {
			out = append(out, o.AsMcpCall())
		}
	}
	return out
}

// getJSON is alice's GET of path, which must answer 200.
func getJSON(t *testing.T, tb *apitest.Bundle, path string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, tb.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+apitest.TokenFor(t, "alice"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	return body
}

// conversationItems are GET /v1/conversations/{id}/items, oldest first,
// as JSON texts.
func conversationItems(t *testing.T, tb *apitest.Bundle, conv string) []string {
	t.Helper()
	body := getJSON(t, tb, "/v1/conversations/"+conv+"/items?order=asc&limit=100")
	var list struct{ Data []json.RawMessage }
	if json.Unmarshal(body, &list) != nil {
		t.Fatalf("items: %s", body)
	}
	out := make([]string, len(list.Data))
	for i, d := range list.Data {
		out[i] = string(d)
	}
	return out
}

// A call of one of convo's own tools (the demo's calculator, which runs
// on the worker) is an mcp_call item, server_label "convo": its id is
// "mcp_" and the tool call's, its name, arguments and output the tool
// call's as the conversation holds it, status completed. The stream adds
// it with output_item.added, mcp_call.in_progress, the arguments whole in
// one mcp_call_arguments.delta and .done, then mcp_call.completed and
// output_item.done. A client dropped in the middle of those events resumes
// after the last it saw without a gap or a repeat; a replay, also after
// compaction, is the live run again byte for byte. The conversation's
// items hold the same mcp_call item.
func TestOwnToolCallIsAnMCPCall(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true, DemoPace: 400})
	c := client(t, tb, "alice")
	ctx := context.Background()
	s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("what is 6*7?")},
		Background: openaisdk.Bool(true),
	})
	live := readUntil(t, s, func(e responses.ResponseStreamEventUnion) bool { return e.Type == "response.mcp_call_arguments.delta" })
	s.Close() // the client goes away between the call's events
	if len(live) == 0 || live[len(live)-1].typ != "response.mcp_call_arguments.delta" {
		t.Fatalf("the live stream %v; want it to reach response.mcp_call_arguments.delta", live)
	}
	var created responses.ResponseCreatedEvent
	if err := json.Unmarshal([]byte(live[0].json), &created); err != nil {
		t.Fatal(err)
	}
	id := created.Response.ID
	rest := readUntil(t, c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openaisdk.Int(live[len(live)-1].seq)}), terminal)
	all := append(append([]seen{}, live...), rest...)
	var types []string
	for i, e := range all {
		if e.seq != int64(i) {
			t.Fatalf("event %d is numbered %d (%s); want 0, 1, 2 … without a gap or a repeat", i, e.seq, e.typ)
		}
		if strings.Contains(e.typ, "mcp_call") || strings.Contains(e.typ, "output_item") && strings.Contains(e.json, `"mcp_call"`) {
			types = append(types, e.typ)
		}
		if strings.Contains(e.json, "function_call") || strings.Contains(e.json, "mcp_approval") {
			t.Fatalf("event %s; want the call shown once, as an mcp_call", e.json)
		}
	}
	want := []string{"response.output_item.added", "response.mcp_call.in_progress", "response.mcp_call_arguments.delta",
		"response.mcp_call_arguments.done", "response.mcp_call.completed", "response.output_item.done"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("the call's events %v; want %v", types, want)
	}

	got, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	var done responses.ResponseCompletedEvent
	if err := json.Unmarshal([]byte(all[len(all)-1].json), &done); err != nil || !jsonEqual(t, done.Response.RawJSON(), got.RawJSON()) {
		t.Fatalf("the stream's final response\n%s\nGET's\n%s", done.Response.RawJSON(), got.RawJSON())
	}
	conv := uuid.MustParse(got.Conversation.ID)
	calls, items := toolCalls(t, tb, conv), mcpCalls(got)
	if len(calls) != 1 || len(items) != 1 {
		t.Fatalf("tool calls %+v, response %s; want one call, one mcp_call item", calls, got.RawJSON())
	}
	call, item := calls[0], items[0]
	if item.ID != "mcp_"+call.ID.String() || item.ServerLabel != "convo" || item.Name != "calculator" || item.Name != call.Name ||
		!jsonEqual(t, item.Arguments, string(call.Input)) || item.Output != call.Output || call.Output == "" ||
		item.Status != "completed" || item.JSON.Error.Valid() && item.JSON.Error.Raw() != "null" || item.JSON.ApprovalRequestID.Raw() != "null" {
		t.Fatalf("mcp_call %s; want the tool call %+v", item.RawJSON(), call)
	}
	if !strings.Contains(item.Output, "42") || !strings.Contains(got.OutputText(), "42") {
		t.Fatalf("the call's output %q, the text %q; want the product, 42", item.Output, got.OutputText())
	}
	var added, finished responses.ResponseOutputItemAddedEvent
	for _, e := range all {
		if e.typ == "response.output_item.added" && strings.Contains(e.json, `"mcp_call"`) {
			_ = json.Unmarshal([]byte(e.json), &added)
		}
		if e.typ == "response.output_item.done" && strings.Contains(e.json, `"mcp_call"`) {
			_ = json.Unmarshal([]byte(e.json), &finished)
		}
	}
	if a := added.Item.AsMcpCall(); a.Status != "in_progress" || a.Arguments != "" || a.ID != item.ID {
		t.Fatalf("added %s; want the item in progress, its arguments to follow", added.Item.RawJSON())
	}
	if !jsonEqual(t, finished.Item.RawJSON(), item.RawJSON()) {
		t.Fatalf("output_item.done %s; want the response's item %s", finished.Item.RawJSON(), item.RawJSON())
	}

	found := false
	for _, it := range conversationItems(t, tb, got.Conversation.ID) {
		if strings.Contains(it, `"mcp_call"`) {
			found = true
			if !jsonEqual(t, it, item.RawJSON()) {
				t.Fatalf("the conversation's item %s; want the response's %s", it, item.RawJSON())
			}
		}
	}
	if !found {
		t.Fatal("the conversation's items have no mcp_call")
	}
	if one := getJSON(t, tb, "/v1/conversations/"+got.Conversation.ID+"/items/"+item.ID); !jsonEqual(t, string(one), item.RawJSON()) {
		t.Fatalf("GET the item: %s; want %s", one, item.RawJSON())
	}

	replay := func(when string) {
		t.Helper()
		again := readUntil(t, c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), terminal)
		if len(again) != len(all) {
			t.Fatalf("%s: the replay has %d events, the live run %d", when, len(again), len(all))
		}
		for i := range all {
			if again[i].json != all[i].json {
				t.Fatalf("%s: replayed event %d\n%s\nlive\n%s", when, i, again[i].json, all[i].json)
			}
		}
	}
	replay("after the reply ended")
	var removed int
	if err := tb.Pool.QueryRow(ctx, "SELECT convo.compact_prompt($1)", promptOf(t, id)).Scan(&removed); err != nil {
		t.Fatal(err)
	}
	if removed == 0 {
		t.Fatal("compaction merged no delta: the test proves nothing")
	}
	replay("after compaction")
}

// A call of an own tool that fails (the demo's "/call" of the calculator
// with arguments its schema refuses) is an mcp_call item with status
// failed, mcp_call.failed, and the call's error as a tool execution
// error's text.
func TestFailedOwnToolCall(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true})
	c := client(t, tb, "alice")
	ctx := context.Background()
	s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(`/call calculator {"expression": 7}`)},
	})
	events := readUntil(t, s, terminal)
	var typ []string
	for _, e := range events {
		if strings.HasPrefix(e.typ, "response.mcp_call.") {
			typ = append(typ, e.typ)
		}
	}
	if strings.Join(typ, " ") != "response.mcp_call.in_progress response.mcp_call.failed" {
		t.Fatalf("the call's status events %v; want in_progress then failed", typ)
	}
	var done responses.ResponseCompletedEvent
	if err := json.Unmarshal([]byte(events[len(events)-1].json), &done); err != nil {
		t.Fatal(err)
	}
	calls, items := toolCalls(t, tb, uuid.MustParse(done.Response.Conversation.ID)), mcpCalls(&done.Response)
	if len(calls) != 1 || len(items) != 1 || calls[0].Status != conversation.ToolCallFailed || calls[0].Error == "" {
		t.Fatalf("tool calls %+v, response %s; want one failed call and its item", calls, done.Response.RawJSON())
	}
	item := items[0]
	content, _ := json.Marshal(item.Error.AsMcpToolCallErrorMcpToolExecutionError().Content)
	if item.Status != "failed" || item.Name != "calculator" || item.Error.Type != "mcp_tool_execution_error" ||
		!jsonEqual(t, string(content), `[{"type":"text","text":`+string(must(json.Marshal(calls[0].Error)))+`}]`) {
		t.Fatalf("mcp_call %s; want failed with the call's error %q", item.RawJSON(), calls[0].Error)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// An own tool that needs approval (the demo's /approve: publish_note) is,
// as OpenAI's MCP tools are, an mcp_approval_request in the response that
// asks, and, once approved, an mcp_call in the continuation that ran it
// (approval_request_id the request's id, the call's output): each response
// shows the call once. A denied call is no mcp_call.
func TestApprovedCallIsTheContinuationsMCPCall(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true})
	c := client(t, tb, "alice")
	ctx := context.Background()
	for _, approve := range []bool{true, false} {
		first, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
			Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("/approve publish hello")}})
		if err != nil {
			t.Fatal(err)
		}
		var req responses.ResponseOutputItemMcpApprovalRequest
		for _, o := range first.Output {
			if o.Type == "mcp_approval_request" {
				req = o.AsMcpApprovalRequest()
			}
		}
		if req.ID == "" || len(mcpCalls(first)) != 0 {
			t.Fatalf("first response %s; want the approval request alone", first.RawJSON())
		}
		next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", PreviousResponseID: openaisdk.String(first.ID),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMcpApprovalResponse(req.ID, approve)}}})
		if err != nil {
			t.Fatal(err)
		}
		calls, items := toolCalls(t, tb, uuid.MustParse(next.Conversation.ID)), mcpCalls(next)
		if len(calls) != 1 {
			t.Fatalf("tool calls %+v; want publish_note's", calls)
		}
		if !approve {
			if len(items) != 0 {
				t.Fatalf("denied: continuation %s; want no mcp_call", next.RawJSON())
			}
			continue
		}
		if len(items) != 1 {
			t.Fatalf("continuation %s; want the approved call as one mcp_call", next.RawJSON())
		}
		call, item := calls[0], items[0]
		if item.ID != "mcp_"+call.ID.String() || item.ApprovalRequestID != req.ID || item.Name != "publish_note" ||
			item.Status != "completed" || item.Output != call.Output || call.Output == "" || !jsonEqual(t, item.Arguments, string(call.Input)) {
			t.Fatalf("mcp_call %s; want the approved tool call %+v, approval_request_id %s", item.RawJSON(), call, req.ID)
		}
		n := 0
		for _, it := range conversationItems(t, tb, next.Conversation.ID) {
			if strings.Contains(it, `"mcp_call"`) {
				n++
				if !jsonEqual(t, it, item.RawJSON()) {
					t.Fatalf("the conversation's item %s; want the continuation's %s", it, item.RawJSON())
				}
			}
		}
		if n != 1 {
			t.Fatalf("the conversation has %d mcp_call items; want 1", n)
		}
	}
}
