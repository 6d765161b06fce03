package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/httpapi/internal/apitest"
)

// weatherTool is a function tool the tests declare.
func weatherTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name: "get_weather", Description: openaisdk.String("The weather in a city."), Strict: openaisdk.Bool(true),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required": []string{"city"}, "additionalProperties": false},
	}}
}

// callWeather asks the demo model (through the in-process workers) to
// call get_weather, and returns the response, which ended with the call.
func callWeather(t *testing.T, c openaisdk.Client) *responses.Response {
	t.Helper()
	resp, err := c.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(`/call get_weather {"city":"Paris"}`)},
		Tools: []responses.ToolUnionParam{weatherTool()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// functionCall is the response's one function_call item.
func functionCall(t *testing.T, resp *responses.Response) responses.ResponseFunctionToolCall {
	t.Helper()
	var calls []responses.ResponseFunctionToolCall
	for _, o := range resp.Output {
		if o.Type == "function_call" {
			calls = append(calls, o.AsFunctionCall())
		}
	}
	if len(calls) != 1 {
		t.Fatalf("response %s; want one function_call item", resp.RawJSON())
	}
	return calls[0]
}

// outputOf is a function_call_output input item answering callID.
func outputOf(callID, output string) responses.ResponseInputItemUnionParam {
	item := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	item.OfFunctionCallOutput.CallID = openaisdk.String(callID)
	return item
}

// A function tool's round trip with the demo model: the response ends,
// completed, with a function_call item (fc_ and convo's tool call id,
// call_id that id, the model's arguments); a continuation with
// previous_response_id and the call's function_call_output is a new
// response (the prompt's next segment) of the same reply, whose text says
// what the tool answered. The first response stays as it ended; each
// lists its own input items; the conversation holds one reply.
func TestFunctionToolRoundTrip(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true})
	c := client(t, tb, "alice")
	ctx := context.Background()
	first := callWeather(t, c)
	call := functionCall(t, first)
	var args struct{ City string }
	if first.Status != "completed" || call.Name != "get_weather" || call.ID != "fc_"+call.CallID || call.Status != "completed" ||
		json.Unmarshal([]byte(call.Arguments), &args) != nil || args.City != "Paris" {
		t.Fatalf("first response %s; want completed with get_weather's call, city Paris", first.RawJSON())
	}
	if len(first.Tools) != 1 || first.Tools[0].Name != "get_weather" || !first.Tools[0].Strict {
		t.Fatalf("tools %s; want get_weather as declared", first.RawJSON())
	}
	if _, err := uuid.Parse(call.CallID); err != nil {
		t.Fatalf("call_id %q is not convo's tool call id", call.CallID)
	}

	next, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: "demo", PreviousResponseID: openaisdk.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{outputOf(call.CallID, "sunny, 21 C")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if next.ID != first.ID+"_1" || next.PreviousResponseID != first.ID || next.Status != "completed" ||
		!strings.Contains(next.OutputText(), "get\\_weather answered") || !strings.Contains(next.OutputText(), "sunny, 21 C") {
		t.Fatalf("continuation %s; want %s_1, completed, saying what get_weather answered", next.RawJSON(), first.ID)
	}
	for _, o := range next.Output {
		if o.Type != "message" && o.Type != "reasoning" {
			t.Fatalf("continuation output %s; want its own text only (the call was the first response's)", next.RawJSON())
		}
	}
	again, err := c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, again.RawJSON(), first.RawJSON()) {
		t.Fatalf("the first response changed once answered:\n%s\nwas\n%s", again.RawJSON(), first.RawJSON())
	}
	got, err := c.Responses.Get(ctx, next.ID, responses.ResponseGetParams{})
	if err != nil || !jsonEqual(t, got.RawJSON(), next.RawJSON()) {
		t.Fatalf("GET %s: %v\n%s\nwant\n%s", next.ID, err, got.RawJSON(), next.RawJSON())
	}
	items, err := c.Responses.InputItems.List(ctx, next.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items.Data) != 1 || items.Data[0].Type != "function_call_output" || items.Data[0].CallID != call.CallID ||
		items.Data[0].ID != "fco_"+call.CallID || items.Data[0].AsFunctionCallOutput().Output.OfString != "sunny, 21 C" {
		t.Fatalf("the continuation's input items %s; want the function_call_output", items.RawJSON())
	}
	items, err = c.Responses.InputItems.List(ctx, first.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Type != "message" {
		t.Fatalf("the first response's input items %v %v; want the user's message", items, err)
	}
	if _, err := c.Responses.Get(ctx, first.ID+"_2", responses.ResponseGetParams{}); err == nil {
		t.Fatal("a segment that never began was found")
	} else {
		apiErr(t, err, http.StatusNotFound, "")
	}
	st := tb.State(t, "alice", uuid.MustParse(first.Conversation.ID))
	if len(st.Messages) != 2 || st.Messages[1].Status != conversation.MessageCompleted {
		t.Fatalf("conversation %+v; want the message and one completed reply", st.Messages)
	}
}

// The continuation's stream, read half, dropped and resumed after the
// last sequence_number seen, numbers its events from 0 without a gap or a
// repeat, from response.created to response.completed; a replay after the
// end is the live run again, byte for byte, and so is the first
// response's (which ended with the function call's events).
func TestFunctionToolStreamResumeAndReplay(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true, DemoPace: 400})
	c := client(t, tb, "alice")
	ctx := context.Background()
	s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo", Input: responses.ResponseNewParamsInputUnion{OfString: openaisdk.String(`/call get_weather {"city":"Oslo"}`)},
		Tools: []responses.ToolUnionParam{weatherTool()}, Background: openaisdk.Bool(true),
	})
	firstLive := readUntil(t, s, terminal)
	var types []string
	for _, e := range firstLive {
		if strings.Contains(e.typ, "function_call") || strings.Contains(e.typ, "output_item") && strings.Contains(e.json, "function_call") {
			types = append(types, e.typ)
		}
	}
	want := []string{"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done"}
	if strings.Join(types, " ") != strings.Join(want, " ") || firstLive[len(firstLive)-1].typ != "response.completed" {
		t.Fatalf("the first stream's call events %v, ending %s; want %v then response.completed", types, firstLive[len(firstLive)-1].typ, want)
	}
	var done responses.ResponseCompletedEvent
	if err := json.Unmarshal([]byte(firstLive[len(firstLive)-1].json), &done); err != nil {
		t.Fatal(err)
	}
	first := done.Response
	call := functionCall(t, &first)

	s = c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo", PreviousResponseID: openaisdk.String(first.ID), Background: openaisdk.Bool(true),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{outputOf(call.CallID, "snow")}},
	})
	deltas := 0
	live := readUntil(t, s, func(e responses.ResponseStreamEventUnion) bool {
		if e.Type == "response.output_text.delta" {
			deltas++
		}
		return deltas == 3 || terminal(e)
	})
	s.Close() // the client goes away mid-reply
	var created responses.ResponseCreatedEvent
	if err := json.Unmarshal([]byte(live[0].json), &created); err != nil || live[0].typ != "response.created" || live[0].seq != 0 {
		t.Fatalf("the continuation's stream starts %v", live[0])
	}
	id := created.Response.ID
	if id != first.ID+"_1" {
		t.Fatalf("continuation id %s; want %s_1", id, first.ID)
	}
	rest := readUntil(t, c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openaisdk.Int(live[len(live)-1].seq)}), terminal)
	all := append(append([]seen{}, live...), rest...)
	for i, e := range all {
		if e.seq != int64(i) {
			t.Fatalf("event %d is numbered %d (%s); want 0, 1, 2 … without a gap or a repeat", i, e.seq, e.typ)
		}
	}
	if end := all[len(all)-1]; end.typ != "response.completed" || !strings.Contains(end.json, "snow") {
		t.Fatalf("the continuation ends with %s %s; want response.completed saying the tool answered snow", end.typ, end.json)
	}
	for name, run := range map[string][]seen{first.ID: firstLive, id: all} {
		replay := readUntil(t, c.Responses.GetStreaming(ctx, name, responses.ResponseGetParams{}), terminal)
		if len(replay) != len(run) {
			t.Fatalf("%s: the replay has %d events, the live run %d", name, len(replay), len(run))
		}
		for i := range run {
			if replay[i].json != run[i].json {
				t.Fatalf("%s: event %d replayed as\n%s\nlive\n%s", name, i, replay[i].json, run[i].json)
			}
		}
	}
}

// Every refusal of a function tool request, and of a continuation, is a
// 400 naming the field or item, and writes nothing: no conversation for
// a new request; for a continuation, the call still waits, unanswered,
// and the conversation's log has no new event.
func TestFunctionToolRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true})
	ctx := context.Background()
	bob := client(t, tb, "bob")
	text := responses.ResponseNewParamsInputUnion{OfString: openaisdk.String("hi")}
	fn := func(name string, params map[string]any) responses.ToolUnionParam {
		return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name, Parameters: params, Strict: openaisdk.Bool(false)}}
	}
	object := map[string]any{"type": "object"}
	deep := map[string]any{"type": "object"}
	for range 20 { // 41 levels: over the schema budget's 32, within JSON's 64
		deep = map[string]any{"type": "object", "properties": map[string]any{"x": deep}}
	}
	for _, tc := range []struct {
		name   string
		params responses.ResponseNewParams
		param  string
	}{
		{"a web search tool", responses.ResponseNewParams{Tools: []responses.ToolUnionParam{fn("f", object),
			{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}}, "tools[1].type"},
		{"a bad name", responses.ResponseNewParams{Tools: []responses.ToolUnionParam{fn("get weather", object)}}, "tools[0].name"},
		{"a name twice", responses.ResponseNewParams{Tools: []responses.ToolUnionParam{fn("f", object), fn("f", object)}}, "tools[1].name"},
		{"parameters not of an object", responses.ResponseNewParams{Tools: []responses.ToolUnionParam{fn("f", map[string]any{"type": "string"})}}, "tools[0].parameters"},
		{"parameters over the schema budget", responses.ResponseNewParams{Tools: []responses.ToolUnionParam{fn("f", deep)}}, "tools[0].parameters"},
		{"tool_choice required", responses.ResponseNewParams{Tools: []responses.ToolUnionParam{fn("f", object)},
			ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openaisdk.Opt(responses.ToolChoiceOptionsRequired)}}, "tool_choice"},
		{"parallel_tool_calls false", responses.ResponseNewParams{ParallelToolCalls: openaisdk.Bool(false)}, "parallel_tool_calls"},
		{"an output without previous_response_id", responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{
			OfInputItemList: responses.ResponseInputParam{outputOf(uuid.NewString(), "x")}}}, "previous_response_id"},
	} {
		tc.params.Model = "demo"
		if tc.params.Input.OfInputItemList == nil {
			tc.params.Input = text
		}
		_, err := bob.Responses.New(ctx, tc.params)
		e := apiErr(t, err, http.StatusBadRequest, tc.param)
		if tc.name == "a bad name" && !strings.Contains(e.Message, "get weather") {
			t.Errorf("%s: %q does not name the value", tc.name, e.Message)
		}
	}
	if list, err := tb.Store.ListConversations(ctx, "bob", 10, nil); err != nil || len(list) != 0 {
		t.Fatalf("bob's conversations %v %v; want none: refusals write nothing", list, err)
	}

	alice := client(t, tb, "alice")
	first := callWeather(t, alice)
	call := functionCall(t, first)
	conv := uuid.MustParse(first.Conversation.ID)
	before, err := tb.Store.EventsAfter(ctx, conv, 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	msg := responses.ResponseInputItemParamOfMessage("and also", responses.EasyInputMessageRoleUser)
	approval := responses.ResponseInputItemParamOfMcpApprovalResponse("mcpr_"+call.CallID, true)
	for _, tc := range []struct {
		name  string
		input responses.ResponseNewParamsInputUnion
		param string
		says  string
	}{
		{"text while the call waits", text, "input", "No tool output found for function call " + call.CallID},
		{"an unknown call_id", responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			outputOf(uuid.NewString(), "x")}}, "input[0].call_id", "No tool call found"},
		{"a call_id that is not convo's", responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			outputOf("call_abc", "x")}}, "input[0].call_id", "call_abc"},
		{"a message beside the output", responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			outputOf(call.CallID, "x"), msg}}, "input[1]", "answers to a response's calls"},
		{"the output twice", responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			outputOf(call.CallID, "x"), outputOf(call.CallID, "y")}}, "input[1]", "again"},
		{"an approval for a function call", responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			approval}}, "input[0]", "with the wrong item: it takes a function_call_output"},
		{"an approval of an unknown request", responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMcpApprovalResponse("mcpr_"+uuid.NewString(), true)}}, "input[0].approval_request_id", "No approval request found"},
	} {
		_, err := alice.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", PreviousResponseID: openaisdk.String(first.ID), Input: tc.input})
		if e := apiErr(t, err, http.StatusBadRequest, tc.param); !strings.Contains(e.Message, tc.says) {
			t.Errorf("%s: %q; want it to say %q", tc.name, e.Message, tc.says)
		}
	}
	after, err := tb.Store.EventsAfter(ctx, conv, 0, 100_000)
	if err != nil || len(after) != len(before) {
		t.Fatalf("%d events after the refusals, %d before (%v); want none written", len(after), len(before), err)
	}
	st := tb.State(t, "alice", conv)
	if len(st.PendingInputs) != 1 || st.PendingInputs[0].Status != conversation.InputPending || st.PendingInputs[0].ToolCallID.String() != call.CallID {
		t.Fatalf("pending inputs %+v; want the call still waiting", st.PendingInputs)
	}
}

// convo's own approval pause (the demo's /approve: publish_note needs the
// user's approval) is an mcp_approval_request item (server_label
// "convo"); an mcp_approval_response approving it resumes the reply in a
// continuation, which ran the tool.
func TestApprovalRoundTrip(t *testing.T) {
	t.Parallel()
	tb := apitest.Setup(t, apitest.Options{Verifier: apitest.Verifier(), Workers: true})
	c := client(t, tb, "alice")
	ctx := context.Background()
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
	if first.Status != "completed" || req.Name != "publish_note" || req.ServerLabel != "convo" || !strings.HasPrefix(req.ID, "mcpr_") ||
		!strings.Contains(req.Arguments, "publish hello") {
		t.Fatalf("first response %s; want an mcp_approval_request of publish_note", first.RawJSON())
	}
	next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "demo", PreviousResponseID: openaisdk.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMcpApprovalResponse(req.ID, true)}}})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status != "completed" || !strings.Contains(next.OutputText(), "Approved: the note is published") {
		t.Fatalf("continuation %s; want the approved tool's result", next.RawJSON())
	}
	items, err := c.Responses.InputItems.List(ctx, next.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.Data[0].Type != "mcp_approval_response" || items.Data[0].ApprovalRequestID != req.ID ||
		!items.Data[0].Approve {
		t.Fatalf("the continuation's input items %v %v; want the approval", items, err)
	}
}
