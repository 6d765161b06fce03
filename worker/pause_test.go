package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"

	. "github.com/convo-dev/convo/worker"
)

// pauseBundle is a test of one paused prompt: a scripted model that says
// "Let me check.", calls one tool, and once it has the result answers
// "Done."; the requests it saw in its second round; the runs of the Go
// tool that needs approval.
type pauseBundle struct {
	*testBundle
	model    Model
	tools    *Tools
	resumed  chan Request // the second round's requests
	runs     atomic.Int32 // runs of delete_file
	prompt   sent
	toolCall uuid.UUID
	// inputExpiry is the pools' Config.InputExpiry.
	inputExpiry time.Duration
}

// pauseTools are delete_file (needs approval), write_file (needs approval
// except for scratch.txt), get_location (a client tool with an output
// schema, whose requests expire after 2 hours) and ask_user.
func (pb *pauseBundle) pauseTools(t *testing.T) *Tools {
	type file struct {
		Path string `json:"path"`
	}
	params := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	del := NewTool("delete_file", "Deletes a file.", params, func(ctx context.Context, in file, _ io.Writer) (string, error) {
		pb.runs.Add(1)
		return "deleted " + in.Path, nil
	})
	del.NeedsApproval = true
	write := NewTool("write_file", "Writes a file.", params, func(ctx context.Context, in file, _ io.Writer) (string, error) {
		return "wrote " + in.Path, nil
	})
	write.NeedsApprovalFor = func(args json.RawMessage) bool {
		var f file
		_ = json.Unmarshal(args, &f)
		return f.Path != "scratch.txt"
	}
	location := Tool{Name: "get_location", Description: "The browser's location.", OutputSchema: json.RawMessage(`{"type":"object"}`),
		InputExpiry: 2 * time.Hour}
	ts, err := NewTools(del, write, location, AskUser())
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func setupPause(t *testing.T, tool, args string) *pauseBundle {
	t.Helper()
	pb := &pauseBundle{testBundle: setup(t), resumed: make(chan Request, 10)}
	pb.tools = pb.pauseTools(t)
	pb.model = scripted(
		[]any{
			Part{Index: 0, Chunk: MessageChunk("Let me check.")}, Flush{Index: 0},
			Part{Index: 1, Chunk: ToolCallStart{ID: "call_1", Name: tool}}, Part{Index: 1, Chunk: ToolCallArgs(args)}, Flush{Index: 1},
			Finish{Reason: FinishToolCalls},
		},
		[]any{
			func(req Request) { pb.resumed <- req },
			Part{Index: 0, Chunk: MessageChunk("Done.")}, Finish{Reason: FinishStop},
		},
	)
	return pb
}

// startPool starts a pool named name with the scripted model and the
// pause tools.
func (pb *pauseBundle) startPool(t *testing.T, name string) (*Pool, *results) {
	t.Helper()
	return pb.start(t, Config{Name: name, Models: modelsWith(pb.model), Tools: pb.tools, InputExpiry: pb.inputExpiry})
}

// pause sends the message on a pool "w1" and checks that the prompt parks:
// the result says waiting, the prompt is queued and waiting, held by no
// one, with the request of kind pending; the slot is free (another
// prompt runs on the one worker meanwhile). Then it stops the pool, so
// that another one resumes the prompt.
func (pb *pauseBundle) pause(t *testing.T, kind string) apiq.PromptInputsRow {
	t.Helper()
	ctx := context.Background()
	p1, res := pb.startPool(t, "w1")
	pb.prompt = pb.send(t, uuid.Nil, "Please do it.", `{}`)
	if r := res.wait(t, pb.prompt.promptID, 20*time.Second); r.Outcome != OutcomeWaiting || r.Err != nil {
		t.Fatalf("outcome %s (%v), want waiting", r.Outcome, r.Err)
	}
	var status string
	var waiting bool
	var worker *string
	var lease *time.Time
	if err := pb.db.QueryRow(ctx, `SELECT status, waiting, worker, lease_expires_at FROM convo.prompts WHERE id = $1`,
		pb.prompt.promptID).Scan(&status, &waiting, &worker, &lease); err != nil {
		t.Fatal(err)
	}
	if status != "queued" || !waiting || worker != nil || lease != nil {
		t.Errorf("prompt %s waiting=%v worker=%v lease=%v; want queued, waiting, no worker, no lease", status, waiting, worker, lease)
	}
	inputs, err := apiq.New(pb.db).PromptInputs(ctx, pb.prompt.promptID)
	if err != nil || len(inputs) != 1 {
		t.Fatalf("prompt inputs %+v, %v", inputs, err)
	}
	in := inputs[0]
	if in.Kind != kind || in.Status != "pending" || in.ToolCallStatus != "started" {
		t.Errorf("request %s %s on a %s call; want %s pending on a started call", in.Kind, in.Status, in.ToolCallStatus, kind)
	}
	pb.toolCall = in.ToolCallID

	// The tool call, its request, the end of its block and the wait were
	// written together: nothing between them in the log.
	var kinds []conversation.EventKind
	for _, e := range pb.events(t, pb.prompt.conversationID) {
		if e.Kind == conversation.EventToolCallStarted || len(kinds) > 0 {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []conversation.EventKind{conversation.EventToolCallStarted, conversation.EventInputRequested,
		conversation.EventBlockEnd, conversation.EventPromptWaiting}; !slices.Equal(kinds, want) {
		t.Errorf("events from the tool call on: %v, want %v", kinds, want)
	}

	// The one slot is free: another prompt runs while this one waits.
	other := pb.send(t, uuid.Nil, "Something else.", `{"provider": "demo"}`)
	if r := res.wait(t, other.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("another prompt while one waits: outcome %s (%v)", r.Outcome, r.Err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p1.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	return in
}

func (pb *pauseBundle) answer(t *testing.T, answer string) {
	t.Helper()
	if _, err := dbq.New(pb.db).InputAnswer(context.Background(), dbq.InputAnswerParams{
		OwnerID: "local", ToolCallID: pb.toolCall, Answer: json.RawMessage(answer),
	}); err != nil {
		t.Fatalf("answer %s: %v", answer, err)
	}
}

// resume starts a pool "w2" (as after a restart) and checks that it
// completes the prompt: the model's second round saw the reply so far
// (its text and call) and toolResult as the call's result; the message
// holds the text, the call, its result and "Done.", in that order; the
// call ended as wantStatus.
func (pb *pauseBundle) resume(t *testing.T, toolResult string, wantStatus conversation.ToolCallStatus) conversation.ToolCall {
	t.Helper()
	_, res := pb.startPool(t, "w2")
	r := res.wait(t, pb.prompt.promptID, 20*time.Second)
	if r.Outcome != OutcomeCompleted || r.Worker != "w2" {
		t.Fatalf("resumed: outcome %s by %s (%v), want completed by w2", r.Outcome, r.Worker, r.Err)
	}
	var req Request
	select {
	case req = <-pb.resumed:
	default:
		t.Fatal("the model's second round never ran")
	}
	n := len(req.Messages)
	if n < 3 {
		t.Fatalf("the model saw %d messages: %+v", n, req.Messages)
	}
	asked, told := req.Messages[n-2], req.Messages[n-1]
	if asked.Role != RoleAssistant || asked.Text != "Let me check." || len(asked.ToolCalls) != 1 ||
		asked.ToolCalls[0].ID != pb.toolCall.String() {
		t.Errorf("the model's own turn: %+v", asked)
	}
	if told.Role != RoleTool || told.ToolCallID != pb.toolCall.String() || told.Text != toolResult {
		t.Errorf("the model was told %+v, want %q", told, toolResult)
	}
	if req.Messages[n-3].Role != RoleUser || req.Messages[n-3].Text != "Please do it." {
		t.Errorf("before its turn: %+v", req.Messages[n-3])
	}

	m := pb.message(t, pb.prompt)
	var types []string
	for _, b := range m.Blocks {
		types = append(types, b.Type)
	}
	if m.Status != conversation.MessageCompleted || !slices.Equal(types, []string{"text", "tool_use", "tool_result", "text"}) {
		t.Fatalf("message %s with blocks %v", m.Status, types)
	}
	if m.Blocks[0].Content != "Let me check." || m.Blocks[2].Content != toolResult || m.Blocks[3].Content != "Done." {
		t.Errorf("blocks %q, %q, %q", m.Blocks[0].Content, m.Blocks[2].Content, m.Blocks[3].Content)
	}
	if status, _ := pb.testBundle.prompt(t, pb.prompt.promptID); status != "completed" {
		t.Errorf("prompt %s", status)
	}
	if !strings.Contains(string(m.Blocks[2].Metadata), `"inputKind"`) {
		t.Errorf("tool_result metadata %s, want its inputKind", m.Blocks[2].Metadata)
	}
	call := m.Blocks[1].ToolCall
	if call == nil || call.Status != wantStatus {
		t.Fatalf("tool call %+v, want %s", call, wantStatus)
	}
	return *call
}

// TestPause parks a prompt on each kind of input request, answers it in
// SQL, and resumes it on another pool.
func TestPause(t *testing.T) {
	t.Parallel()

	t.Run("ApprovalApproved", func(t *testing.T) {
		t.Parallel()
		pb := setupPause(t, "delete_file", `{"path": "notes.txt"}`)
		pb.pause(t, "approval")
		if n := pb.runs.Load(); n != 0 {
			t.Fatalf("the tool ran %d times before its approval", n)
		}
		pb.answer(t, `{"approved": true}`)
		call := pb.resume(t, "deleted notes.txt", conversation.ToolCallCompleted)
		if call.Output != "deleted notes.txt" || pb.runs.Load() != 1 {
			t.Errorf("output %q, %d runs", call.Output, pb.runs.Load())
		}
	})

	t.Run("ApprovalDeniedWithReason", func(t *testing.T) {
		t.Parallel()
		pb := setupPause(t, "delete_file", `{"path": "notes.txt"}`)
		pb.pause(t, "approval")
		pb.answer(t, `{"approved": false, "reason": "not that file"}`)
		call := pb.resume(t, "error: denied by the user: not that file", conversation.ToolCallFailed)
		if call.Error != "denied by the user: not that file" || pb.runs.Load() != 0 {
			t.Errorf("error %q, %d runs", call.Error, pb.runs.Load())
		}
	})

	t.Run("ApprovalExpiredReadsAsDenial", func(t *testing.T) {
		t.Parallel()
		pb := setupPause(t, "delete_file", `{"path": "notes.txt"}`)
		pb.pause(t, "approval")
		ctx := context.Background()
		if _, err := pb.db.Exec(ctx, `UPDATE convo.input_requests SET expires_at = now() - interval '1 second'`); err != nil {
			t.Fatal(err)
		}
		if _, err := dbq.New(pb.db).PromptExpireLeases(ctx); err != nil {
			t.Fatal(err)
		}
		call := pb.resume(t, "error: denied: the request expired", conversation.ToolCallFailed)
		if pb.runs.Load() != 0 {
			t.Errorf("an expired approval ran the tool (%s)", call.Error)
		}
	})

	t.Run("ApprovalPerCall", func(t *testing.T) {
		t.Parallel()
		pb := setupPause(t, "write_file", `{"path": "scratch.txt"}`)
		_, res := pb.startPool(t, "w1")
		s := pb.send(t, uuid.Nil, "Write it.", `{}`)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("a call NeedsApprovalFor lets through: outcome %s (%v)", r.Outcome, r.Err)
		}
		req := <-pb.resumed
		if got := req.Messages[len(req.Messages)-1].Text; got != "wrote scratch.txt" {
			t.Errorf("the model was told %q", got)
		}

		pb = setupPause(t, "write_file", `{"path": "notes.txt"}`)
		pb.pause(t, "approval")
	})

	t.Run("ClientTool", func(t *testing.T) {
		t.Parallel()
		pb := setupPause(t, "get_location", `{}`)
		in := pb.pause(t, "client_tool")
		if string(in.Request) != `{"outputSchema": {"type": "object"}}` {
			t.Errorf("request %s, want the output schema", in.Request)
		}
		pb.answer(t, `{"output": "{\"city\": \"Paris\"}"}`)
		pb.resume(t, `{"city": "Paris"}`, conversation.ToolCallCompleted)
	})

	t.Run("ClientToolError", func(t *testing.T) {
		t.Parallel()
		pb := setupPause(t, "get_location", `{}`)
		pb.pause(t, "client_tool")
		pb.answer(t, `{"error": "no permission"}`)
		call := pb.resume(t, "error: no permission", conversation.ToolCallFailed)
		if call.Error != "no permission" {
			t.Errorf("error %q", call.Error)
		}
	})

	t.Run("Question", func(t *testing.T) {
		t.Parallel()
		pb := setupPause(t, "ask_user", `{"question": "Which file?", "choices": ["notes.txt", "todo.txt"]}`)
		in := pb.pause(t, "question")
		var req struct {
			Question string
			Choices  []string
		}
		if err := json.Unmarshal(in.Request, &req); err != nil || req.Question != "Which file?" || len(req.Choices) != 2 {
			t.Errorf("request %s", in.Request)
		}
		pb.answer(t, `{"answer": "todo.txt"}`)
		call := pb.resume(t, "todo.txt", conversation.ToolCallCompleted)
		if call.Output != "todo.txt" {
			t.Errorf("output %q", call.Output)
		}
	})

	t.Run("WithACallThatRan", func(t *testing.T) {
		t.Parallel()
		// One round calls write_file on scratch.txt (no approval: it runs
		// at once) and delete_file (waits): the resumed model sees both
		// calls in its turn, and both results.
		pb := setupPause(t, "", "")
		pb.model = scripted(
			[]any{
				Part{Index: 0, Chunk: ToolCallStart{ID: "call_1", Name: "write_file"}}, Part{Index: 0, Chunk: ToolCallArgs(`{"path": "scratch.txt"}`)},
				Part{Index: 1, Chunk: ToolCallStart{ID: "call_2", Name: "delete_file"}}, Part{Index: 1, Chunk: ToolCallArgs(`{"path": "notes.txt"}`)},
				Finish{Reason: FinishToolCalls},
			},
			[]any{
				func(req Request) { pb.resumed <- req },
				Part{Index: 0, Chunk: MessageChunk("Done.")}, Finish{Reason: FinishStop},
			},
		)
		p1, res := pb.startPool(t, "w1")
		s := pb.send(t, uuid.Nil, "Both.", `{}`)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeWaiting {
			t.Fatalf("outcome %s (%v), want waiting", r.Outcome, r.Err)
		}
		if err := p1.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		inputs, err := apiq.New(pb.db).PromptInputs(context.Background(), s.promptID)
		if err != nil || len(inputs) != 1 || inputs[0].Name != "delete_file" {
			t.Fatalf("inputs %+v, %v", inputs, err)
		}
		pb.toolCall = inputs[0].ToolCallID
		pb.answer(t, `{"approved": false, "reason": "keep it"}`)
		_, res = pb.startPool(t, "w2")
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s (%v)", r.Outcome, r.Err)
		}
		req := <-pb.resumed
		n := len(req.Messages)
		turn, results := req.Messages[n-3], req.Messages[n-2:]
		if turn.Role != RoleAssistant || len(turn.ToolCalls) != 2 || turn.ToolCalls[0].Name != "write_file" || turn.ToolCalls[1].Name != "delete_file" {
			t.Fatalf("the model's turn: %+v", turn)
		}
		got := map[string]string{}
		for _, m := range results {
			got[m.ToolCallID] = m.Text
		}
		if got[turn.ToolCalls[0].ID] != "wrote scratch.txt" || got[turn.ToolCalls[1].ID] != "error: denied by the user: keep it" {
			t.Errorf("results %+v for %+v", results, turn.ToolCalls)
		}
		var types []string
		for _, b := range pb.message(t, s).Blocks {
			types = append(types, b.Type)
		}
		if want := []string{"tool_use", "tool_use", "tool_result", "tool_result", "text"}; !slices.Equal(types, want) {
			t.Errorf("blocks %v, want %v", types, want)
		}
	})

	t.Run("TextAfterTheCall", func(t *testing.T) {
		t.Parallel()
		// Text the model streamed after its call, in the same round, reads
		// as its next turn, after the call's result.
		pb := setupPause(t, "", "")
		pb.model = scripted(
			[]any{
				Part{Index: 0, Chunk: ToolCallStart{ID: "call_1", Name: "ask_user"}}, Part{Index: 0, Chunk: ToolCallArgs(`{"question": "Which?"}`)},
				Part{Index: 1, Chunk: MessageChunk("I will wait.")},
				Finish{Reason: FinishToolCalls},
			},
			[]any{
				func(req Request) { pb.resumed <- req },
				Part{Index: 0, Chunk: MessageChunk("Done.")}, Finish{Reason: FinishStop},
			},
		)
		p1, res := pb.startPool(t, "w1")
		s := pb.send(t, uuid.Nil, "Go.", `{}`)
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeWaiting {
			t.Fatalf("outcome %s (%v), want waiting", r.Outcome, r.Err)
		}
		if err := p1.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		inputs, err := apiq.New(pb.db).PromptInputs(context.Background(), s.promptID)
		if err != nil || len(inputs) != 1 {
			t.Fatalf("inputs %+v, %v", inputs, err)
		}
		pb.toolCall = inputs[0].ToolCallID
		pb.answer(t, `{"answer": "this one"}`)
		_, res = pb.startPool(t, "w2")
		if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s (%v)", r.Outcome, r.Err)
		}
		req := <-pb.resumed
		got := req.Messages[len(req.Messages)-3:]
		if got[0].Role != RoleAssistant || len(got[0].ToolCalls) != 1 || got[1].Role != RoleTool || got[1].Text != "this one" ||
			got[2].Role != RoleAssistant || got[2].Text != "I will wait." {
			t.Errorf("the model's last messages: %+v", got)
		}
	})

	for _, answered := range []bool{false, true} {
		name := "CancelledWhileWaitingNeverRuns"
		if answered {
			name = "AnsweredThenCancelledNeverRuns"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testCancelledWhileWaiting(t, answered)
		})
	}
}

// testCancelledWhileWaiting cancels a waiting prompt (answered first, so
// claimable, when answered) and checks that no pool runs it again.
func testCancelledWhileWaiting(t *testing.T, answered bool) {
	pb := setupPause(t, "delete_file", `{"path": "notes.txt"}`)
	pb.pause(t, "approval")
	if answered {
		pb.answer(t, `{"approved": true}`)
	}
	if ok, err := pb.store.CancelPrompt(context.Background(), "local", pb.prompt.promptID); err != nil || !ok {
		t.Fatalf("cancel: %v %v", ok, err)
	}
	_, res := pb.startPool(t, "w2")
	// The pool claims in order: once a later prompt is done, the
	// cancelled one was passed over.
	later := pb.send(t, uuid.Nil, "Later.", `{"provider": "demo"}`)
	if r := res.wait(t, later.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
		t.Fatalf("later prompt: %s (%v)", r.Outcome, r.Err)
	}
	select {
	case <-pb.resumed:
		t.Fatal("the model ran for a cancelled prompt")
	default:
	}
	if status, _ := pb.testBundle.prompt(t, pb.prompt.promptID); status != "cancelled" || pb.runs.Load() != 0 {
		t.Errorf("prompt %s, %d runs", status, pb.runs.Load())
	}
	if m := pb.message(t, pb.prompt); m.Blocks[1].ToolCall.Status != conversation.ToolCallFailed {
		t.Errorf("tool call %s, want failed", m.Blocks[1].ToolCall.Status)
	}
}

// TestDemoModelPauses: the demo model's trigger words call a tool that
// needs approval, a client tool and ask_user; answered, the reply goes on.
func TestDemoModelPauses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, tool, kind, answer, want string }{
		{"/approve this note.", "publish_note", "approval", `{"approved": true}`, "published a note of 19 characters"},
		{"/approve this note.", "publish_note", "approval", `{"approved": false, "reason": "not now"}`, "denied by the user: not now"},
		{"/client-tool please", "browser_info", "client_tool", `{"output": "{\"timeZone\": \"Europe/Paris\"}"}`, "Europe/Paris"},
		{"/ask me something", "ask_user", "question", `{"answer": "green"}`, "green"},
	} {
		t.Run(tc.tool+tc.answer[:12], func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			p1, res := tb.start(t, Config{Name: "w1"})
			s := tb.send(t, uuid.Nil, tc.text, `{"provider": "demo"}`)
			if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeWaiting {
				t.Fatalf("outcome %s (%v), want waiting", r.Outcome, r.Err)
			}
			ctx := context.Background()
			if err := p1.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			inputs, err := apiq.New(tb.db).PromptInputs(ctx, s.promptID)
			if err != nil || len(inputs) != 1 || inputs[0].Name != tc.tool || inputs[0].Kind != tc.kind {
				t.Fatalf("inputs %+v, %v", inputs, err)
			}
			if _, err := dbq.New(tb.db).InputAnswer(ctx, dbq.InputAnswerParams{
				OwnerID: "local", ToolCallID: inputs[0].ToolCallID, Answer: json.RawMessage(tc.answer),
			}); err != nil {
				t.Fatal(err)
			}
			_, res = tb.start(t, Config{Name: "w2"})
			if r := res.wait(t, s.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
				t.Fatalf("outcome %s (%v)", r.Outcome, r.Err)
			}
			m := tb.message(t, s)
			last := m.Blocks[len(m.Blocks)-1]
			if last.Type != "text" || !strings.Contains(last.Content, tc.want) {
				t.Errorf("answer %q, want it to hold %q", last.Content, tc.want)
			}
		})
	}
}

// TestInputExpiry: a request expires after the tool's InputExpiry, else
// after Config.InputExpiry, else never.
func TestInputExpiry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tool, args, kind string
		config, want           time.Duration // want 0: no expiry
	}{
		{"Never", "delete_file", `{"path": "notes.txt"}`, "approval", 0, 0},
		{"Config", "delete_file", `{"path": "notes.txt"}`, "approval", time.Hour, time.Hour},
		{"ConfigForAskUser", "ask_user", `{"question": "Which one?"}`, "question", 30 * time.Minute, 30 * time.Minute},
		{"ToolWins", "get_location", `{}`, "client_tool", time.Hour, 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pb := setupPause(t, tc.tool, tc.args)
			pb.inputExpiry = tc.config
			before := time.Now()
			in := pb.pause(t, tc.kind)
			switch {
			case tc.want == 0 && in.ExpiresAt != nil:
				t.Errorf("expires at %v, want never", in.ExpiresAt)
			case tc.want > 0 && in.ExpiresAt == nil:
				t.Errorf("no expiry, want %v", tc.want)
			case tc.want > 0 && (in.ExpiresAt.Before(before.Add(tc.want)) || in.ExpiresAt.After(time.Now().Add(tc.want))):
				t.Errorf("expires at %v, want %v after the request (made after %v)", in.ExpiresAt, tc.want, before)
			}
		})
	}
}
