package connectapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/pgtest"
)

// TestPauseEventsOnlyWhenAsked: a stream gets the events of a pause only
// when it asked for them (include_pause_events); a stream that did not
// ask gets a messageUpdated of the same seq in place of each, so its seqs
// have no gap. Over a parked stream (the Connect protocol over HTTP/1.1)
// and one that keeps its handler (gRPC over h2c).
func TestPauseEventsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tb := setup(t)
	sent := tb.send(t, tb.client, "", "use a tool that needs approval")
	clients := map[string]convov1connect.ConversationServiceClient{"ConnectHTTP1": tb.client, "GRPCOverH2C": tb.h2cClient(connect.WithGRPC())}
	type follower struct {
		name   string
		pauses bool
		stream *connect.ServerStreamForClient[convov1.StreamConversationResponse]
	}
	var followers []follower
	for name, client := range clients {
		for _, pauses := range []bool{false, true} {
			st, err := client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{
				ConversationId: sent.ConversationId, IncludePauseEvents: pauses,
			}))
			if err != nil {
				t.Fatal(err)
			}
			if !st.Receive() || st.Msg().GetSnapshot() == nil {
				t.Fatalf("%s: no snapshot: %v", name, st.Err())
			}
			followers = append(followers, follower{name, pauses, st})
		}
	}

	// A worker pauses for approval of a tool call; then the owner approves.
	_, call, err := pgtest.PauseForApproval(ctx, tb.pool, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, `SELECT convo.answer_input('local', $1, '{"approved": true}')`, call); err != nil {
		t.Fatal(err)
	}
	last := tb.state(t, sent.ConversationId).Seq

	for _, f := range followers {
		seq := int64(-1)
		var pauseEvents, replaced int
		for seq < last {
			if !f.stream.Receive() {
				t.Fatalf("%s (pauses %v): stream ended at seq %d of %d: %v", f.name, f.pauses, seq, last, f.stream.Err())
			}
			ev := f.stream.Msg().GetEvent()
			if seq >= 0 && ev.Seq != seq+1 {
				t.Fatalf("%s (pauses %v): seq %d after %d", f.name, f.pauses, ev.Seq, seq)
			}
			seq = ev.Seq
			switch ev.GetKind().(type) {
			case *convov1.Event_InputRequested, *convov1.Event_InputAnswered, *convov1.Event_PromptWaiting, *convov1.Event_InputClaimed:
				pauseEvents++
			case *convov1.Event_MessageUpdated:
				replaced++
			}
		}
		switch {
		case f.pauses && pauseEvents != 3:
			t.Errorf("%s asked for pause events: got %d, want inputRequested, promptWaiting, inputAnswered", f.name, pauseEvents)
		case !f.pauses && pauseEvents != 0:
			t.Errorf("%s did not ask for pause events but got %d", f.name, pauseEvents)
		case !f.pauses && replaced < 3:
			t.Errorf("%s did not ask: %d messageUpdated, want at least the 3 in place of the pause's events", f.name, replaced)
		}
	}
}

// paused sends a message and plays a worker that pauses its reply for a
// request of kind asking request; it returns the message sent, the
// prompt's and the tool call's ids.
func (tb *testBundle) paused(t testing.TB, kind, request string) (*convov1.SendMessageResponse, string, string) {
	t.Helper()
	sent := tb.send(t, tb.client, "", "use a tool")
	prompt, call, err := pgtest.PauseForInput(context.Background(), tb.pool, "w1", kind, request)
	if err != nil {
		t.Fatal(err)
	}
	return sent, prompt, call
}

// claimable returns the prompt a worker claims now, or "" when none is
// claimable.
func (tb *testBundle) claimable(t testing.TB) string {
	t.Helper()
	var prompt string
	err := tb.pool.QueryRow(context.Background(), `SELECT coalesce((SELECT prompt_id::text FROM convo.claim_prompt('w2', 30)), '')`).Scan(&prompt)
	if err != nil {
		t.Fatal(err)
	}
	return prompt
}

func answerInput(client convov1connect.ConversationServiceClient, toolCallID string, answer *convov1.InputAnswer) (*convov1.InputRequest, error) {
	res, err := client.AnswerInput(context.Background(), connect.NewRequest(&convov1.AnswerInputRequest{ToolCallId: toolCallID, Answer: answer}))
	if err != nil {
		return nil, err
	}
	return res.Msg.InputRequest, nil
}

func claimInput(client convov1connect.ConversationServiceClient, toolCallID, claimant string, lease int32) (*convov1.InputRequest, error) {
	res, err := client.ClaimInput(context.Background(), connect.NewRequest(&convov1.ClaimInputRequest{ToolCallId: toolCallID, Claimant: claimant, LeaseSeconds: lease}))
	if err != nil {
		return nil, err
	}
	return res.Msg.InputRequest, nil
}

func approval(approved bool, reason string) *convov1.InputAnswer {
	return &convov1.InputAnswer{Kind: &convov1.InputAnswer_Approval{Approval: &convov1.ApprovalAnswer{Approved: approved, Reason: reason}}}
}

func clientOutput(output string) *convov1.InputAnswer {
	return &convov1.InputAnswer{Kind: &convov1.InputAnswer_ClientTool{ClientTool: &convov1.ClientToolAnswer{Result: &convov1.ClientToolAnswer_Output{Output: output}}}}
}

func clientError(msg string) *convov1.InputAnswer {
	return &convov1.InputAnswer{Kind: &convov1.InputAnswer_ClientTool{ClientTool: &convov1.ClientToolAnswer{Result: &convov1.ClientToolAnswer_Error{Error: msg}}}}
}

func questionAnswer(answer string) *convov1.InputAnswer {
	return &convov1.InputAnswer{Kind: &convov1.InputAnswer_Question{Question: &convov1.QuestionAnswer{Answer: answer}}}
}

// TestAnswerInput answers each kind of request through the RPC: the
// request comes back answered with the answer as convo.answer_input
// stores it, the waiting prompt is claimable again, and a second answer
// is refused, naming the state, changing nothing.
func TestAnswerInput(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		kind, request string
		answer        *convov1.InputAnswer
		stored        string
	}{
		"Approve":               {"approval", `{}`, approval(true, ""), `{"approved": true}`},
		"Deny":                  {"approval", `{"message": "Send it?"}`, approval(false, "not now"), `{"approved": false, "reason": "not now"}`},
		"ClientToolOutput":      {"client_tool", `{"outputSchema": {"type": "object"}}`, clientOutput(`{"files": 3}`), `{"output": "{\"files\": 3}"}`},
		"ClientToolEmptyOutput": {"client_tool", `{}`, clientOutput(""), `{"output": ""}`},
		"ClientToolError":       {"client_tool", `{}`, clientError("the tab closed"), `{"error": "the tab closed"}`},
		"Question":              {"question", `{"question": "Which file?", "choices": ["notes.txt", "todo.txt"]}`, questionAnswer("todo.txt"), `{"answer": "todo.txt"}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tb := setup(t)
			sent, prompt, call := tb.paused(t, tc.kind, tc.request)
			if got := tb.claimable(t); got != "" {
				t.Fatalf("a waiting prompt was claimable: %s", got)
			}
			r, err := answerInput(tb.client, call, tc.answer)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != "answered" || r.Kind != tc.kind || r.ToolCallId != call || r.PromptId != prompt ||
				r.ConversationId != sent.ConversationId || r.AnsweredAt == nil || r.CreatedAt == nil {
				t.Errorf("answered request = %v", r)
			}
			var stored bool
			if err := tb.pool.QueryRow(ctx, `SELECT answer = $2::jsonb FROM convo.input_requests WHERE tool_call_id = $1`, call, tc.stored).Scan(&stored); err != nil || !stored {
				t.Errorf("stored answer is not %s (%v)", tc.stored, err)
			}
			if got, _ := r.Answer.MarshalJSON(); !jsonEqual(t, got, tc.stored) {
				t.Errorf("answer = %s, want %s", got, tc.stored)
			}
			if got := tb.claimable(t); got != prompt {
				t.Errorf("claimable after the answer: %q, want the prompt %s", got, prompt)
			}

			before := tb.countRows(t)
			_, err = answerInput(tb.client, call, tc.answer)
			if ce := requireCode(t, err, connect.CodeFailedPrecondition); !strings.Contains(ce.Message(), "was already answered at") {
				t.Errorf("second answer: %q", ce.Message())
			}
			if after := tb.countRows(t); after != before {
				t.Errorf("a refused answer changed something:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestAnswerInputRefused: answers that the request's kind, choices or
// schema refuse are InvalidArgument naming the field; answers to a
// request that is no longer pending are FailedPrecondition naming its
// state. Nothing changes.
func TestAnswerInputRefused(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		kind, request string
		before        string // SQL run before the answer ($1: the tool call)
		answer        *convov1.InputAnswer
		code          connect.Code
		message       string
	}{
		"WrongKind":       {"question", `{"question": "Which file?"}`, "", approval(true, ""), connect.CodeInvalidArgument, "the answer to a question request takes answer"},
		"NotAChoice":      {"question", `{"question": "Which?", "choices": ["a", "b"]}`, "", questionAnswer("c"), connect.CodeInvalidArgument, "answer.answer must be one of the choices"},
		"NotOfSchemaType": {"client_tool", `{"outputSchema": {"type": "object"}}`, "", clientOutput("[1]"), connect.CodeInvalidArgument, "answer.output: does not match the client tool's output schema: $: got array, want object"},
		"NotOfSchema": {"client_tool", `{"outputSchema": {"type": "object", "required": ["timeZone"], "properties": {"timeZone": {"type": "string"}}}}`, "",
			clientOutput(`{"timeZone": 2}`), connect.CodeInvalidArgument, "answer.output: does not match the client tool's output schema: $.timeZone: got number, want string"},
		"MissingProperty": {"client_tool", `{"outputSchema": {"type": "object", "required": ["timeZone"]}}`, "",
			clientOutput(`{"time": "now"}`), connect.CodeInvalidArgument, "missing property 'timeZone'"},
		"OutputNotJSON": {"client_tool", `{"outputSchema": {"type": "object"}}`, "", clientOutput("Paris"), connect.CodeInvalidArgument, "answer.output: does not match the client tool's output schema: not JSON"},
		"Expired": {"approval", `{}`, `UPDATE convo.input_requests SET expires_at = now() - interval '1 second' WHERE tool_call_id = $1`,
			approval(true, ""), connect.CodeFailedPrecondition, "expired at"},
		"Cancelled": {"approval", `{}`, `SELECT convo.cancel_prompt(prompt_id) FROM convo.input_requests WHERE tool_call_id = $1`,
			approval(true, ""), connect.CodeFailedPrecondition, "was cancelled at"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			_, _, call := tb.paused(t, tc.kind, tc.request)
			if tc.before != "" {
				if _, err := tb.pool.Exec(context.Background(), tc.before, call); err != nil {
					t.Fatal(err)
				}
			}
			before := tb.countRows(t)
			_, err := answerInput(tb.client, call, tc.answer)
			if ce := requireCode(t, err, tc.code); !strings.Contains(ce.Message(), tc.message) {
				t.Errorf("message %q does not say %q", ce.Message(), tc.message)
			}
			if after := tb.countRows(t); after != before {
				t.Errorf("a refused answer changed something:\nbefore %s\nafter  %s", before, after)
			}
			if tc.code == connect.CodeInvalidArgument && tb.claimable(t) != "" {
				t.Error("a refused answer made the prompt claimable")
			}
		})
	}
}

// TestClaimInput: a client tool's run is claimed exactly once across
// tabs: of tabs claiming at once exactly one wins; another tab is refused
// while the claim holds (naming the holder); the holder renews; a lapsed
// claim goes to the next tab; an approval is not claimed.
func TestClaimInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	_, _, call := tb.paused(t, "client_tool", `{}`)

	const tabs = 8
	var wg sync.WaitGroup
	won := make([]bool, tabs)
	errs := make([]error, tabs)
	for i := range tabs {
		wg.Go(func() {
			_, errs[i] = claimInput(tb.client, call, fmt.Sprintf("tab-%d", i), 0)
			won[i] = errs[i] == nil
		})
	}
	wg.Wait()
	winner := -1
	for i := range tabs {
		switch {
		case won[i] && winner >= 0:
			t.Fatalf("tab-%d and tab-%d both claimed the run", winner, i)
		case won[i]:
			winner = i
		default:
			if ce := requireCode(t, errs[i], connect.CodeFailedPrecondition); !strings.Contains(ce.Message(), "is claimed by tab-") {
				t.Errorf("tab-%d: %q", i, ce.Message())
			}
		}
	}
	if winner < 0 {
		t.Fatal("no tab claimed the run")
	}
	holder, other := fmt.Sprintf("tab-%d", winner), fmt.Sprintf("tab-%d", (winner+1)%tabs)

	// The default lease is 30 s.
	first, err := claimInput(tb.client, call, holder, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lease := first.ClaimExpiresAt.AsTime().Sub(time.Now()); first.ClaimedBy != holder || lease < 20*time.Second || lease > 31*time.Second {
		t.Errorf("renewal = %v (lease %v), want %s for about 30 s", first, lease, holder)
	}
	renewed, err := claimInput(tb.client, call, holder, 600)
	if err != nil || renewed.ClaimExpiresAt.AsTime().Sub(first.ClaimExpiresAt.AsTime()) < 500*time.Second {
		t.Fatalf("renewal for 600 s = %v, %v", renewed, err)
	}

	before := tb.countRows(t)
	_, err = claimInput(tb.client, call, other, 30)
	if ce := requireCode(t, err, connect.CodeFailedPrecondition); !strings.Contains(ce.Message(), "is claimed by "+holder+" until") {
		t.Errorf("message %q", ce.Message())
	}
	if after := tb.countRows(t); after != before {
		t.Errorf("a refused claim changed something:\nbefore %s\nafter  %s", before, after)
	}

	// The holder's claim lapses (its tab closed): the next tab takes it.
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.input_requests SET claim_expires_at = now() - interval '1 second' WHERE tool_call_id = $1`, call); err != nil {
		t.Fatal(err)
	}
	if taken, err := claimInput(tb.client, call, other, 30); err != nil || taken.ClaimedBy != other {
		t.Fatalf("claim of a lapsed claim = %v, %v", taken, err)
	}
	if _, err := answerInput(tb.client, call, clientOutput("done")); err != nil {
		t.Fatal(err)
	}
	_, err = claimInput(tb.client, call, other, 30)
	if ce := requireCode(t, err, connect.CodeFailedPrecondition); !strings.Contains(ce.Message(), "was already answered at") {
		t.Errorf("claim of an answered request: %q", ce.Message())
	}

	t.Run("NotAClientTool", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		_, _, call := tb.paused(t, "approval", `{}`)
		_, err := claimInput(tb.client, call, "tab-1", 30)
		if ce := requireCode(t, err, connect.CodeFailedPrecondition); !strings.Contains(ce.Message(), "only client_tool requests are claimed") {
			t.Errorf("message %q", ce.Message())
		}
	})
}

// TestPendingInputsOnlyWhenAsked: the snapshot of a stream and
// GetConversation carry the open input requests only when the client asks
// for the events of pauses; a client that does not ask gets exactly what
// it got before pauses existed.
func TestPendingInputsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	sent, prompt, call := tb.paused(t, "question", `{"question": "Which file?"}`)

	for _, pauses := range []bool{false, true} {
		res, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.ConversationId, IncludePauseEvents: pauses}))
		if err != nil {
			t.Fatal(err)
		}
		st, err := tb.client.StreamConversation(ctx, connect.NewRequest(&convov1.StreamConversationRequest{ConversationId: sent.ConversationId, IncludePauseEvents: pauses}))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Receive() || st.Msg().GetSnapshot() == nil {
			t.Fatalf("no snapshot: %v", st.Err())
		}
		snap := st.Msg().GetSnapshot()
		st.Close()
		for what, inputs := range map[string][]*convov1.InputRequest{"GetConversation": res.Msg.PendingInputs, "snapshot": snap.PendingInputs} {
			switch {
			case !pauses && len(inputs) != 0:
				t.Errorf("%s without include_pause_events has pending inputs %v", what, inputs)
			case pauses && (len(inputs) != 1 || inputs[0].ToolCallId != call || inputs[0].PromptId != prompt ||
				inputs[0].Status != "pending" || inputs[0].Kind != "question" || inputs[0].Request.Fields["question"].GetStringValue() != "Which file?"):
				t.Errorf("%s with include_pause_events: pending inputs %v, want the question", what, inputs)
			}
		}
	}
}

// TestPendingInputsFold: a subscriber that asked for the events of
// pauses, whether it joined before the request or late (its snapshot then
// holds the request), folds its snapshot and the events that follow to
// exactly GetConversation with include_pause_events, through a request, a
// claim, an answer and the worker's resumption; and one that did not ask
// folds to GetConversation without them.
func TestPendingInputsFold(t *testing.T) {
	t.Parallel()
	forEachFeed(t, func(t *testing.T, feed string) {
		ctx := context.Background()
		tb := setup(t, setupOptions{feed: feed})
		sent := tb.send(t, tb.client, "", "use a tool")
		getState := func(pauses bool) *convov1.GetConversationResponse {
			res, err := tb.client.GetConversation(ctx, connect.NewRequest(&convov1.GetConversationRequest{ConversationId: sent.ConversationId, IncludePauseEvents: pauses}))
			if err != nil {
				t.Fatal(err)
			}
			return res.Msg
		}
		check := func(subs map[bool]*subscriber, seq int64) {
			t.Helper()
			for pauses, sub := range subs {
				st := sub.waitSeq(t, seq, streamTimeout)
				if want := getState(pauses); !st.equal(want) {
					t.Errorf("pauses %v: fold differs from GetConversation at seq %d: %s", pauses, seq, st.diff(want))
				}
			}
		}
		join := func() map[bool]*subscriber {
			return map[bool]*subscriber{
				false: subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId}),
				true:  subscribe(t, tb.client, &convov1.StreamConversationRequest{ConversationId: sent.ConversationId, IncludePauseEvents: true}),
			}
		}
		// first joins before the request: it folds it from inputRequested.
		first := join()
		prompt, call, err := pgtest.PauseForInput(ctx, tb.pool, "w1", "client_tool", `{"outputSchema": {"type": "object"}}`)
		if err != nil {
			t.Fatal(err)
		}
		check(first, tb.mark(t, sent.ConversationId))
		early := join()
		if snap := early[true].waitSeq(t, 0, streamTimeout); len(snap.pending) != 1 {
			t.Fatalf("late joiner's snapshot has %d pending inputs, want 1", len(snap.pending))
		}
		if _, err := claimInput(tb.client, call, "tab-1", 30); err != nil {
			t.Fatal(err)
		}
		claimed := join()
		check(early, tb.mark(t, sent.ConversationId))
		if _, err := answerInput(tb.client, call, clientOutput(`{"files": 3}`)); err != nil {
			t.Fatal(err)
		}
		answered := join()
		if st := answered[true].waitSeq(t, 0, streamTimeout); len(st.pending) != 1 || st.pending[0].Status != "answered" {
			t.Errorf("after the answer, the snapshot's pending inputs are %v; want the answered request, not yet acted on", st.pending)
		}
		check(claimed, tb.mark(t, sent.ConversationId))
		// A worker resumes the prompt and ends the call: nothing is open.
		if _, err := tb.pool.Exec(ctx, `SELECT convo.claim_prompt('w2', 30); SELECT convo.start_prompt('`+prompt+`'); SELECT convo.complete_tool_call('`+call+`', '3 files');`); err != nil {
			t.Fatal(err)
		}
		seq := tb.mark(t, sent.ConversationId)
		for _, subs := range []map[bool]*subscriber{first, early, claimed, answered, join()} {
			check(subs, seq)
		}
		if got := getState(true).PendingInputs; len(got) != 0 {
			t.Errorf("pending inputs after the call ended: %v", got)
		}
	})
}

func jsonEqual(t testing.TB, a []byte, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
