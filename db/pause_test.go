package db_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/db"
	"github.com/convo-dev/convo/db/sqlstate"
	"github.com/convo-dev/convo/internal/pgtest"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres/dbq"
)

// toolCall starts, on a running prompt, a tool_use block (ended) and a
// tool call on it, and returns the call's id.
func (tb *testBundle) toolCall(t testing.TB, promptID uuid.UUID, name string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	block := tb.startBlock(t, promptID, "tool_use")
	if err := tb.api.BlockEnd(ctx, apiq.BlockEndParams{BlockID: block}); err != nil {
		t.Fatal(err)
	}
	call, err := tb.api.ToolCallStart(ctx, apiq.ToolCallStartParams{BlockID: block, Name: name, Input: json.RawMessage(`{"path":"notes.txt"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return call
}

// requestInput asks for input of kind on the call.
func (tb *testBundle) requestInput(t testing.TB, call uuid.UUID, kind, request string) {
	t.Helper()
	if err := tb.api.InputRequest(context.Background(), apiq.InputRequestParams{ToolCallID: call, Kind: kind, Request: json.RawMessage(request)}); err != nil {
		t.Fatalf("request_input: %v", err)
	}
}

// paused starts a reply as worker w1, asks for input of kind on a tool
// call of it, and parks it (wait_prompt).
func (tb *testBundle) paused(t testing.TB, kind, request string) (reply, uuid.UUID) {
	t.Helper()
	r := tb.startReply(t)
	call := tb.toolCall(t, r.promptID, "delete_file")
	tb.requestInput(t, call, kind, request)
	parked, err := tb.api.PromptWait(context.Background(), apiq.PromptWaitParams{PromptID: r.promptID, Worker: "w1"})
	if err != nil || !parked {
		t.Fatalf("wait_prompt = %v, %v; want parked", parked, err)
	}
	return r, call
}

func (tb *testBundle) answer(ctx context.Context, call uuid.UUID, answer string) error {
	_, err := tb.q.InputAnswer(ctx, dbq.InputAnswerParams{OwnerID: "local", ToolCallID: call, Answer: json.RawMessage(answer)})
	return err
}

// promptRow is what the queue knows of a prompt.
type promptRow struct {
	Status   string
	Waiting  bool
	Worker   *string
	Lease    *time.Time
	Attempts int32
	// Held: the fair slots count it as held by its owner; OwnerWaits:
	// its owner waits in convo.owner_queue.
	Held, OwnerWaits bool
}

func (tb *testBundle) promptRow(t testing.TB, id uuid.UUID) promptRow {
	t.Helper()
	var p promptRow
	err := tb.pool.QueryRow(context.Background(), `
		SELECT p.status, p.waiting, p.worker, p.lease_expires_at, p.attempts,
		       p.status = 'running' OR (p.status = 'queued' AND p.worker IS NOT NULL),
		       coalesce((SELECT q.waiting_since IS NOT NULL FROM convo.owner_queue q WHERE q.owner_id = p.owner_id), false)
		  FROM convo.prompts p WHERE p.id = $1`, id).
		Scan(&p.Status, &p.Waiting, &p.Worker, &p.Lease, &p.Attempts, &p.Held, &p.OwnerWaits)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// claimOne claims as w1 and returns the claimed prompt (uuid.Nil: none).
func (tb *testBundle) claimOne(t testing.TB) apiq.PromptClaimRow {
	t.Helper()
	claimed, err := tb.api.PromptClaim(context.Background(), apiq.PromptClaimParams{Worker: "w1", LeaseSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) == 0 {
		return apiq.PromptClaimRow{}
	}
	return claimed[0]
}

// TestPause drives each kind of pause end to end through the SQL API:
// request, wait (the prompt holds nothing and cannot be claimed), answer
// (claimable again), claim, start, read the answer, complete.
func TestPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	for _, tc := range []struct {
		kind, request, answer string
		output                string
	}{
		{"approval", `{"message": "Delete notes.txt?"}`, `{"approved": true, "reason": "fine"}`, "deleted"},
		{"client_tool", `{"outputSchema": {"type": "object"}}`, `{"output": "{\"files\": 3}"}`, `{"files": 3}`},
		{"question", `{"question": "Which file?", "choices": ["notes.txt", "todo.txt"]}`, `{"answer": "todo.txt"}`, "todo.txt"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			r, call := tb.paused(t, tc.kind, tc.request)

			p := tb.promptRow(t, r.promptID)
			if p.Status != "queued" || !p.Waiting || p.Worker != nil || p.Lease != nil || p.Held || p.OwnerWaits {
				t.Errorf("parked prompt = %+v; want queued, waiting, no worker, no lease, not held, its owner not waiting", p)
			}
			if c := tb.claimOne(t); c.PromptID != uuid.Nil {
				t.Fatalf("claimed %s while it waits for input", c.PromptID)
			}
			if keep, err := tb.api.PromptHeartbeat(ctx, apiq.PromptHeartbeatParams{PromptID: r.promptID, Worker: "w1"}); err != nil || keep {
				t.Errorf("heartbeat of the parked prompt = %v, %v; want false", keep, err)
			}
			st := tb.state(t, r.conversationID)
			if st.Conversation.ActivePromptID.UUID != r.promptID {
				t.Errorf("active prompt = %v, want the waiting one", st.Conversation.ActivePromptID)
			}

			open, err := tb.q.InputRequestListOpen(ctx, dbq.InputRequestListOpenParams{ConversationID: r.conversationID, MaxBytes: -1})
			if err != nil || len(open) != 1 || open[0].ToolCallID != call || open[0].Status != "pending" || open[0].Kind != tc.kind {
				t.Errorf("open requests while waiting = %+v, %v", open, err)
			}

			if err := tb.answer(ctx, call, tc.answer); err != nil {
				t.Fatalf("answer_input: %v", err)
			}
			p = tb.promptRow(t, r.promptID)
			if p.Status != "queued" || p.Waiting || !p.OwnerWaits {
				t.Errorf("answered prompt = %+v; want queued, claimable, its owner waiting", p)
			}
			c := tb.claimOne(t)
			if c.PromptID != r.promptID || c.Attempts != 1 {
				t.Fatalf("claim after the answer = %+v; want the prompt, attempt 1 (a resume is no retry)", c)
			}
			if err := tb.api.PromptStart(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
			inputs, err := tb.api.PromptInputs(ctx, r.promptID)
			if err != nil {
				t.Fatal(err)
			}
			if len(inputs) != 1 || inputs[0].ToolCallID != call || inputs[0].Status != "answered" ||
				inputs[0].ToolCallStatus != "started" || inputs[0].Kind != tc.kind || inputs[0].AnsweredAt == nil {
				t.Fatalf("prompt_inputs = %+v", inputs)
			}
			var got, want any
			if err := json.Unmarshal(inputs[0].Answer, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.answer), &want); err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(got, want) {
				t.Errorf("answer read = %s, want %s", inputs[0].Answer, tc.answer)
			}
			// convo.prompt_inputs, for workers in other languages, reads the same
			// for the worker that holds the prompt.
			var fnCall uuid.UUID
			var fnStatus string
			var fnAnswer json.RawMessage
			if err := tb.pool.QueryRow(ctx, `SELECT tool_call_id, status, answer FROM convo.prompt_inputs($1, 'w1')`, r.promptID).
				Scan(&fnCall, &fnStatus, &fnAnswer); err != nil || fnCall != call || fnStatus != "answered" || string(fnAnswer) != string(inputs[0].Answer) {
				t.Errorf("convo.prompt_inputs = %s %s %s, %v", fnCall, fnStatus, fnAnswer, err)
			}
			if err := tb.api.ToolCallComplete(ctx, apiq.ToolCallCompleteParams{ToolCallID: call, Output: &tc.output}); err != nil {
				t.Fatal(err)
			}
			if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
				t.Fatal(err)
			}
			if open, err := tb.q.InputRequestListOpen(ctx, dbq.InputRequestListOpenParams{ConversationID: r.conversationID, MaxBytes: -1}); err != nil || len(open) != 0 {
				t.Errorf("open requests once complete = %+v, %v", open, err)
			}

			want2 := []string{
				"messageCreated", "messageCreated", "promptQueued", "conversationUpdated",
				"promptStarted", "messageUpdated",
				"blockStart", "blockEnd", "toolCallStarted", "inputRequested", "promptWaiting",
				"inputAnswered",
				"promptStarted", "messageUpdated",
				"toolCallCompleted", "promptCompleted", "messageUpdated", "conversationUpdated",
			}
			events := tb.events(t, r.conversationID)
			if !slices.Equal(kinds(events), want2) {
				t.Errorf("events = %q\nwant %q", kinds(events), want2)
			}
			for _, e := range events {
				if !strings.HasPrefix(string(e.Kind), "input") && e.Kind != conversation.EventPromptWaiting {
					continue
				}
				var payload struct {
					Message struct{ ID uuid.UUID }
				}
				if err := json.Unmarshal(e.Payload, &payload); err != nil || payload.Message.ID != r.messageID {
					t.Errorf("%s carries message %v, want the reply's %s (%v)", e.Kind, payload.Message.ID, r.messageID, err)
				}
			}
			var startedTwice []string
			for _, e := range events {
				if e.Kind == conversation.EventPromptStarted {
					var s struct{ Prompt struct{ StartedAt string } }
					if err := json.Unmarshal(e.Payload, &s); err != nil {
						t.Fatal(err)
					}
					startedTwice = append(startedTwice, s.Prompt.StartedAt)
				}
			}
			if len(startedTwice) != 2 || startedTwice[0] != startedTwice[1] {
				t.Errorf("startedAt of the two starts = %q; the resume keeps the first", startedTwice)
			}
		})
	}

	// A waiting prompt newer than a claimable one of its owner: the claim
	// that takes the claimable one must not leave the owner waiting for it.
	t.Run("NeverClaimedWhileWaiting", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		older, newer := tb.sendMessage(t, uuid.Nil, "one"), tb.sendMessage(t, uuid.Nil, "two")
		if c := tb.claimOne(t); c.PromptID != older.promptID {
			t.Fatalf("claimed %s, want the older", c.PromptID)
		}
		if c := tb.claimOne(t); c.PromptID != newer.promptID {
			t.Fatalf("claimed %s, want the newer", c.PromptID)
		}
		if released, err := tb.api.PromptRelease(ctx, apiq.PromptReleaseParams{PromptID: older.promptID, Worker: "w1"}); err != nil || !released {
			t.Fatalf("release = %v, %v", released, err)
		}
		if err := tb.api.PromptStart(ctx, newer.promptID); err != nil {
			t.Fatal(err)
		}
		call := tb.toolCall(t, newer.promptID, "delete_file")
		tb.requestInput(t, call, "approval", `{}`)
		if parked, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: newer.promptID, Worker: "w1"}); err != nil || !parked {
			t.Fatalf("wait_prompt = %v, %v", parked, err)
		}
		if c := tb.claimOne(t); c.PromptID != older.promptID {
			t.Fatalf("claimed %s, want the older", c.PromptID)
		}
		if p := tb.promptRow(t, newer.promptID); p.OwnerWaits {
			t.Errorf("the owner waits in owner_queue for its waiting prompt: %+v", p)
		}
		if c := tb.claimOne(t); c.PromptID != uuid.Nil {
			t.Errorf("claimed %s, which waits for input", c.PromptID)
		}
		if err := tb.api.PromptStart(ctx, newer.promptID); err == nil {
			t.Error("start_prompt started a prompt waiting for input")
		}
	})

	t.Run("FastAnswerDoesNotPark", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		call := tb.toolCall(t, r.promptID, "delete_file")
		tb.requestInput(t, call, "approval", `{}`)
		if err := tb.answer(ctx, call, `{"approved": false}`); err != nil {
			t.Fatal(err)
		}
		parked, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: r.promptID, Worker: "w1"})
		if err != nil || parked {
			t.Fatalf("wait_prompt after the answer = %v, %v; want false", parked, err)
		}
		if p := tb.promptRow(t, r.promptID); p.Status != "running" || p.Worker == nil || *p.Worker != "w1" {
			t.Errorf("prompt = %+v; want still running, held by w1", p)
		}
		// The call ended: nothing is left to wait for.
		if err := tb.api.ToolCallFail(ctx, apiq.ToolCallFailParams{ToolCallID: call, Error: "denied by the user"}); err != nil {
			t.Fatal(err)
		}
		before := tb.fingerprint(t)
		_, err = tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: r.promptID, Worker: "w1"})
		if pgErr := requireSQLState(t, err, sqlstate.IllegalState); !strings.Contains(pgErr.Message, "no input request to wait for") {
			t.Errorf("message %q", pgErr.Message)
		}
		if tb.fingerprint(t) != before {
			t.Error("a refused wait_prompt changed something")
		}
	})

	t.Run("TwoRequestsResumeAfterTheLast", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r := tb.startReply(t)
		first, second := tb.toolCall(t, r.promptID, "a"), tb.toolCall(t, r.promptID, "b")
		tb.requestInput(t, first, "approval", `{}`)
		tb.requestInput(t, second, "question", `{"question": "Why?"}`)
		if parked, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: r.promptID, Worker: "w1"}); err != nil || !parked {
			t.Fatalf("wait_prompt = %v, %v", parked, err)
		}
		ev := tb.events(t, r.conversationID)
		var waiting struct{ ToolCallIds []uuid.UUID }
		if err := json.Unmarshal(ev[len(ev)-1].Payload, &waiting); err != nil || !slices.Equal(waiting.ToolCallIds, []uuid.UUID{first, second}) {
			t.Errorf("promptWaiting toolCallIds = %v (%v), want both, in order", waiting.ToolCallIds, err)
		}
		if err := tb.answer(ctx, first, `{"approved": true}`); err != nil {
			t.Fatal(err)
		}
		if p := tb.promptRow(t, r.promptID); !p.Waiting {
			t.Error("the prompt stopped waiting with a request still pending")
		}
		if err := tb.answer(ctx, second, `{"answer": "because"}`); err != nil {
			t.Fatal(err)
		}
		if p := tb.promptRow(t, r.promptID); p.Waiting {
			t.Error("the prompt still waits after its last answer")
		}
	})
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestPauseFirstAnswerWins answers one request from two connections at
// once: exactly one answer is taken, the other is refused naming it.
func TestPauseFirstAnswerWins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r, call := tb.paused(t, "approval", `{}`)

	start := make(chan struct{})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, answer := range []string{`{"approved": true}`, `{"approved": false, "reason": "no"}`} {
		wg.Go(func() {
			conn, err := tb.pool.Acquire(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Release()
			<-start
			_, errs[i] = dbq.New(conn).InputAnswer(ctx, dbq.InputAnswerParams{OwnerID: "local", ToolCallID: call, Answer: json.RawMessage(answer)})
		})
	}
	close(start)
	wg.Wait()
	var ok, refused int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case sqlstate.Of(err) == sqlstate.IllegalState && strings.Contains(err.Error(), "was already answered at"):
			refused++
		default:
			t.Errorf("answer: %v", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d answers taken and %d refused, want 1 and 1", ok, refused)
	}
	var answered int
	for _, e := range tb.events(t, r.conversationID) {
		if e.Kind == conversation.EventInputAnswered {
			answered++
		}
	}
	if answered != 1 {
		t.Errorf("%d inputAnswered events, want 1", answered)
	}
}

// TestPauseCancel races a decision with a cancel, in both orders: the
// one that takes the conversation's lock first wins, and the log shows it.
func TestPauseCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnswerAfterCancel", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r, call := tb.paused(t, "question", `{"question": "Which?"}`)
		if cancelled, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil || !cancelled {
			t.Fatalf("cancel = %v, %v", cancelled, err)
		}
		p := tb.promptRow(t, r.promptID)
		if p.Status != "cancelled" || p.Waiting {
			t.Errorf("cancelled prompt = %+v", p)
		}
		tail := kinds(tb.events(t, r.conversationID))
		want := []string{"inputAnswered", "toolCallFailed", "promptCancelled", "messageUpdated", "conversationUpdated"}
		if !slices.Equal(tail[len(tail)-len(want):], want) {
			t.Errorf("events end with %q, want %q", tail, want)
		}
		before := tb.fingerprint(t)
		err := tb.answer(ctx, call, `{"answer": "that one"}`)
		if pgErr := requireSQLState(t, err, sqlstate.IllegalState); !strings.Contains(pgErr.Message, "was cancelled at") {
			t.Errorf("message %q", pgErr.Message)
		}
		if tb.fingerprint(t) != before {
			t.Error("a refused answer changed something")
		}
		inputs, err := tb.api.PromptInputs(ctx, r.promptID)
		if err != nil || len(inputs) != 1 || inputs[0].Status != "cancelled" || inputs[0].Answer != nil {
			t.Errorf("prompt_inputs = %+v, %v", inputs, err)
		}
	})

	t.Run("CancelAfterAnswer", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r, call := tb.paused(t, "approval", `{}`)
		if err := tb.answer(ctx, call, `{"approved": true}`); err != nil {
			t.Fatal(err)
		}
		if cancelled, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil || !cancelled {
			t.Fatalf("cancel after the answer = %v, %v; want cancelled", cancelled, err)
		}
		inputs, err := tb.api.PromptInputs(ctx, r.promptID)
		if err != nil || len(inputs) != 1 || inputs[0].Status != "answered" {
			t.Errorf("prompt_inputs = %+v, %v; the answer stays", inputs, err)
		}
		tail := kinds(tb.events(t, r.conversationID))
		want := []string{"inputAnswered", "toolCallFailed", "promptCancelled", "messageUpdated", "conversationUpdated"}
		if !slices.Equal(tail[len(tail)-len(want):], want) {
			t.Errorf("events end with %q, want %q", tail, want)
		}
		if c := tb.claimOne(t); c.PromptID != uuid.Nil {
			t.Errorf("claimed %s, cancelled", c.PromptID)
		}
	})

	// Both at once, on two connections: whichever wins, the log and the
	// request agree with what each caller was told.
	t.Run("AnswerRacingCancel", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		for range 5 {
			r, call := tb.paused(t, "approval", `{}`)
			start := make(chan struct{})
			var answerErr, cancelErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				<-start
				answerErr = tb.answer(ctx, call, `{"approved": true}`)
			})
			wg.Go(func() {
				<-start
				_, cancelErr = tb.store.CancelPrompt(ctx, "local", r.promptID)
			})
			close(start)
			wg.Wait()
			if cancelErr != nil {
				t.Fatalf("cancel: %v", cancelErr)
			}
			inputs, err := tb.api.PromptInputs(ctx, r.promptID)
			if err != nil || len(inputs) != 1 {
				t.Fatalf("prompt_inputs = %+v, %v", inputs, err)
			}
			var log []string
			for _, e := range tb.events(t, r.conversationID) {
				switch e.Kind {
				case conversation.EventInputAnswered:
					var a struct{ Status string }
					if err := json.Unmarshal(e.Payload, &a); err != nil {
						t.Fatal(err)
					}
					log = append(log, "inputAnswered:"+a.Status)
				case conversation.EventPromptCancelled:
					log = append(log, "promptCancelled")
				}
			}
			switch {
			case answerErr == nil:
				if inputs[0].Status != "answered" || !slices.Equal(log, []string{"inputAnswered:answered", "promptCancelled"}) {
					t.Errorf("the answer won, but the request is %s and the log %q", inputs[0].Status, log)
				}
			case sqlstate.Of(answerErr) == sqlstate.IllegalState && strings.Contains(answerErr.Error(), "was cancelled at"):
				if inputs[0].Status != "cancelled" || !slices.Equal(log, []string{"inputAnswered:cancelled", "promptCancelled"}) {
					t.Errorf("the cancel won, but the request is %s and the log %q", inputs[0].Status, log)
				}
			default:
				t.Fatalf("answer: %v", answerErr)
			}
		}
	})

	t.Run("ClearAndDelete", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		r, _ := tb.paused(t, "approval", `{}`)
		if _, err := tb.store.ClearConversation(ctx, "local", r.conversationID); err != nil {
			t.Fatal(err)
		}
		tail := kinds(tb.events(t, r.conversationID))
		want := []string{"inputAnswered", "toolCallFailed", "promptCancelled", "messageUpdated", "conversationUpdated", "historyCleared"}
		if !slices.Equal(tail[len(tail)-len(want):], want) {
			t.Errorf("events end with %q, want %q", tail, want)
		}
		r2, _ := tb.paused(t, "client_tool", `{}`)
		if err := tb.store.DeleteConversation(ctx, "local", r2.conversationID); err != nil {
			t.Fatal(err)
		}
		var left int
		if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.input_requests`).Scan(&left); err != nil || left != 0 {
			t.Errorf("%d input requests left after clear and delete (%v)", left, err)
		}
	})
}

// TestPauseExpiry expires pending requests: each reads as a denial, and
// the waiting prompt is queued again.
func TestPauseExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	approval, question := tb.toolCall(t, r.promptID, "a"), tb.toolCall(t, r.promptID, "b")
	in := time.Now().Add(time.Hour)
	for _, c := range []struct {
		call          uuid.UUID
		kind, request string
	}{{approval, "approval", `{}`}, {question, "question", `{"question": "Why?"}`}} {
		if err := tb.api.InputRequest(ctx, apiq.InputRequestParams{ToolCallID: c.call, Kind: c.kind, Request: json.RawMessage(c.request), ExpiresAt: &in}); err != nil {
			t.Fatal(err)
		}
	}
	if parked, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: r.promptID, Worker: "w1"}); err != nil || !parked {
		t.Fatalf("wait_prompt = %v, %v", parked, err)
	}
	if _, err := tb.q.PromptExpireLeases(ctx); err != nil {
		t.Fatal(err)
	}
	if p := tb.promptRow(t, r.promptID); !p.Waiting {
		t.Fatal("a request expired before its time")
	}
	// Their time comes.
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.input_requests SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	before := tb.fingerprint(t)
	err := tb.answer(ctx, approval, `{"approved": true}`)
	if pgErr := requireSQLState(t, err, sqlstate.IllegalState); !strings.Contains(pgErr.Message, "expired at") {
		t.Errorf("message %q", pgErr.Message)
	}
	if tb.fingerprint(t) != before {
		t.Error("an answer past expires_at changed something")
	}
	if _, err := tb.q.PromptExpireLeases(ctx); err != nil {
		t.Fatal(err)
	}
	inputs, err := tb.api.PromptInputs(ctx, r.promptID)
	if err != nil || len(inputs) != 2 {
		t.Fatalf("prompt_inputs = %+v, %v", inputs, err)
	}
	for i, want := range []string{`{"reason": "the request expired", "approved": false}`, `{"error": "the request expired"}`} {
		if inputs[i].Status != "expired" || string(inputs[i].Answer) != want {
			t.Errorf("request %d = %s %s, want expired %s", i, inputs[i].Status, inputs[i].Answer, want)
		}
	}
	if p := tb.promptRow(t, r.promptID); p.Waiting || !p.OwnerWaits {
		t.Errorf("prompt after the expiry = %+v; want claimable", p)
	}
	var expired int
	for _, e := range tb.events(t, r.conversationID) {
		if e.Kind == conversation.EventInputAnswered && strings.Contains(string(e.Payload), `"status": "expired"`) {
			expired++
		}
	}
	if expired != 2 {
		t.Errorf("%d inputAnswered events with status expired, want 2", expired)
	}
	err = tb.answer(ctx, approval, `{"approved": true}`)
	if pgErr := requireSQLState(t, err, sqlstate.IllegalState); !strings.Contains(pgErr.Message, "expired at") {
		t.Errorf("message %q", pgErr.Message)
	}
	if c := tb.claimOne(t); c.PromptID != r.promptID {
		t.Errorf("claimed %+v, want the prompt", c)
	}
}

// TestPauseClaimInput claims a client tool's run exactly once across tabs:
// another tab is refused while the claim holds, the holder renews, and a
// lapsed claim goes to whoever claims next.
func TestPauseClaimInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r, call := tb.paused(t, "client_tool", `{}`)
	type claimRow struct {
		ClaimedBy      string    `json:"claimedBy"`
		ClaimExpiresAt time.Time `json:"claimExpiresAt"`
	}
	claim := func(tab string) (claimRow, error) {
		var c claimRow
		raw, err := tb.q.InputClaim(ctx, dbq.InputClaimParams{OwnerID: "local", ToolCallID: call, Claimant: tab, LeaseSeconds: 30})
		if err == nil {
			err = json.Unmarshal(raw, &c)
		}
		return c, err
	}
	first, err := claim("tab-1")
	if err != nil || first.ClaimedBy != "tab-1" {
		t.Fatalf("claim = %+v, %v", first, err)
	}
	before := tb.fingerprint(t)
	_, err = claim("tab-2")
	if pgErr := requireSQLState(t, err, sqlstate.IllegalState); !strings.Contains(pgErr.Message, "is claimed by tab-1 until") {
		t.Errorf("message %q", pgErr.Message)
	}
	if tb.fingerprint(t) != before {
		t.Error("a refused claim changed something")
	}
	renewed, err := claim("tab-1")
	if err != nil || renewed.ClaimExpiresAt.Before(first.ClaimExpiresAt) {
		t.Fatalf("renewal = %+v, %v", renewed, err)
	}
	// The claim lapses (tab-1 closed).
	if _, err := tb.pool.Exec(ctx, `UPDATE convo.input_requests SET claim_expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if taken, err := claim("tab-2"); err != nil || taken.ClaimedBy != "tab-2" {
		t.Fatalf("claim of a lapsed claim = %+v, %v", taken, err)
	}
	// Any tab may answer: the claim keeps a second run away, not an answer.
	if err := tb.answer(ctx, call, `{"output": "done"}`); err != nil {
		t.Fatal(err)
	}
	_, err = claim("tab-2")
	if pgErr := requireSQLState(t, err, sqlstate.IllegalState); !strings.Contains(pgErr.Message, "was already answered at") {
		t.Errorf("message %q", pgErr.Message)
	}
	var claimed int
	for _, e := range tb.events(t, r.conversationID) {
		if e.Kind == conversation.EventInputClaimed {
			claimed++
		}
	}
	if claimed != 3 {
		t.Errorf("%d inputClaimed events, want 3", claimed)
	}
}

// TestPauseRefusals checks that every illegal call of pauses is refused
// with its SQLSTATE and a message naming the field or the state, and
// changes nothing.
func TestPauseRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	running := tb.startReply(t)
	open := tb.toolCall(t, running.promptID, "open")
	progressed := tb.toolCall(t, running.promptID, "progressed")
	if err := tb.api.ToolCallProgress(ctx, apiq.ToolCallProgressParams{ToolCallID: progressed, Output: "…"}); err != nil {
		t.Fatal(err)
	}
	waiting, approval := tb.paused(t, "approval", `{}`)
	asking, question := func() (reply, uuid.UUID) {
		r := tb.startReply(t)
		call := tb.toolCall(t, r.promptID, "ask")
		tb.requestInput(t, call, "question", `{"question": "Which?", "choices": ["a", "b"]}`)
		return r, call
	}()
	_, clientTool := func() (reply, uuid.UUID) {
		r := tb.startReply(t)
		call := tb.toolCall(t, r.promptID, "run")
		tb.requestInput(t, call, "client_tool", `{"outputSchema": {"type": ["integer", "null"]}}`)
		return r, call
	}()
	tb.startBlock(t, asking.promptID, "text") // left streaming
	past := time.Now().Add(-time.Minute)

	request := func(call uuid.UUID, kind, req string) func() error {
		return func() error {
			return tb.api.InputRequest(ctx, apiq.InputRequestParams{ToolCallID: call, Kind: kind, Request: json.RawMessage(req)})
		}
	}
	answer := func(owner string, call uuid.UUID, a string) func() error {
		return func() error {
			_, err := tb.q.InputAnswer(ctx, dbq.InputAnswerParams{OwnerID: owner, ToolCallID: call, Answer: json.RawMessage(a)})
			return err
		}
	}
	for _, tc := range []struct {
		name, code, message string
		call                func() error
	}{
		{"UnknownKind", sqlstate.InvalidArgument, "kind must be approval, client_tool or question", request(open, "permission", `{}`)},
		{"RequestNotObject", sqlstate.InvalidArgument, "request must be a JSON object", request(open, "approval", `[]`)},
		{"UnknownRequestKey", sqlstate.InvalidArgument, `takes message, not "title"`, request(open, "approval", `{"title": "x"}`)},
		{"BlankMessage", sqlstate.InvalidArgument, "request.message", request(open, "approval", `{"message": " \u200b"}`)},
		{"SchemaNotObject", sqlstate.InvalidArgument, "request.outputSchema", request(open, "client_tool", `{"outputSchema": "int"}`)},
		{"NoQuestion", sqlstate.InvalidArgument, "request.question", request(open, "question", `{}`)},
		{"EmptyChoices", sqlstate.InvalidArgument, "request.choices must be a non-empty", request(open, "question", `{"question": "Q", "choices": []}`)},
		{"BlankChoice", sqlstate.InvalidArgument, "request.choices must be texts", request(open, "question", `{"question": "Q", "choices": ["a", " "]}`)},
		{"SameChoices", sqlstate.InvalidArgument, "request.choices must be distinct", request(open, "question", `{"question": "Q", "choices": ["a", "a"]}`)},
		{"ExpiredAlready", sqlstate.InvalidArgument, "expires_at must be in the future", func() error {
			return tb.api.InputRequest(ctx, apiq.InputRequestParams{ToolCallID: open, Kind: "approval", Request: json.RawMessage(`{}`), ExpiresAt: &past})
		}},
		{"UnknownToolCall", sqlstate.NotFound, "does not exist", request(uuid.New(), "approval", `{}`)},
		{"ToolCallRunning", sqlstate.IllegalState, "is running: ask before the tool writes output", request(progressed, "approval", `{}`)},
		{"SecondRequest", sqlstate.IllegalState, "already has an input request (question, pending)", request(question, "approval", `{}`)},
		{"RequestOnWaitingPrompt", sqlstate.IllegalState, "is queued, not running", request(approval, "approval", `{}`)},
		{"WaitNotRunning", sqlstate.IllegalState, "is queued, not running", func() error {
			_, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: waiting.promptID, Worker: "w1"})
			return err
		}},
		{"WaitOtherWorker", sqlstate.IllegalState, "is held by w1, not by w2", func() error {
			_, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: running.promptID, Worker: "w2"})
			return err
		}},
		{"WaitWhileStreaming", sqlstate.IllegalState, "is still streaming: end it first", func() error {
			_, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: asking.promptID, Worker: "w1"})
			return err
		}},
		{"WaitNothingAsked", sqlstate.IllegalState, "no input request to wait for", func() error {
			_, err := tb.api.PromptWait(ctx, apiq.PromptWaitParams{PromptID: running.promptID, Worker: "w1"})
			return err
		}},
		{"StartWaiting", sqlstate.IllegalState, "is waiting for input", func() error { return tb.api.PromptStart(ctx, waiting.promptID) }},
		{"SendWhileWaiting", sqlstate.IllegalState, "a reply is waiting for an answer: answer or cancel it", func() error {
			_, err := tb.pool.Exec(ctx, `SELECT convo.send_message('local', $1, 'And?', '[{}]')`, waiting.conversationID)
			return err
		}},
		{"AnswerForeign", sqlstate.NotFound, "does not exist", answer("mallory", approval, `{"approved": true}`)},
		{"AnswerUnknown", sqlstate.NotFound, "does not exist", answer("local", uuid.New(), `{"approved": true}`)},
		{"AnswerNotObject", sqlstate.InvalidArgument, "answer must be a JSON object", answer("local", approval, `true`)},
		{"ApprovedMissing", sqlstate.InvalidArgument, "answer.approved must be true or false", answer("local", approval, `{"reason": "x"}`)},
		{"ApprovalUnknownKey", sqlstate.InvalidArgument, `takes approved, reason, not "answer"`, answer("local", approval, `{"approved": true, "answer": "x"}`)},
		{"ReasonNotText", sqlstate.InvalidArgument, "answer.reason must be a text", answer("local", approval, `{"approved": true, "reason": 1}`)},
		{"QuestionBlank", sqlstate.InvalidArgument, "answer.answer must be a text that shows something", answer("local", question, `{"answer": "\u200b"}`)},
		{"QuestionNotAChoice", sqlstate.InvalidArgument, "answer.answer must be one of the choices", answer("local", question, `{"answer": "c"}`)},
		{"ClientToolBoth", sqlstate.InvalidArgument, "either output or error", answer("local", clientTool, `{"output": "1", "error": "x"}`)},
		{"ClientToolNeither", sqlstate.InvalidArgument, "either output or error", answer("local", clientTool, `{}`)},
		{"ClientToolBlankError", sqlstate.InvalidArgument, "answer.error must be a text that shows something", answer("local", clientTool, `{"error": ""}`)},
		{"ClientToolNotJSON", sqlstate.InvalidArgument, "answer.output must be JSON", answer("local", clientTool, `{"output": "three"}`)},
		{"ClientToolWrongType", sqlstate.InvalidArgument, "answer.output is JSON of type string", answer("local", clientTool, `{"output": "\"3\""}`)},
		{"ClientToolFraction", sqlstate.InvalidArgument, "answer.output is JSON of type number", answer("local", clientTool, `{"output": "3.5"}`)},
		{"ClaimApproval", sqlstate.IllegalState, "only client_tool requests are claimed", func() error {
			_, err := tb.q.InputClaim(ctx, dbq.InputClaimParams{OwnerID: "local", ToolCallID: approval, Claimant: "tab", LeaseSeconds: 30})
			return err
		}},
		{"ClaimForeign", sqlstate.NotFound, "does not exist", func() error {
			_, err := tb.q.InputClaim(ctx, dbq.InputClaimParams{OwnerID: "mallory", ToolCallID: clientTool, Claimant: "tab", LeaseSeconds: 30})
			return err
		}},
		{"ClaimNoClaimant", sqlstate.InvalidArgument, "claimant must be a non-empty name", func() error {
			_, err := tb.q.InputClaim(ctx, dbq.InputClaimParams{OwnerID: "local", ToolCallID: clientTool, Claimant: "", LeaseSeconds: 30})
			return err
		}},
		{"ClaimLease", sqlstate.InvalidArgument, "lease_seconds must be between 1 and 3600", func() error {
			_, err := tb.q.InputClaim(ctx, dbq.InputClaimParams{OwnerID: "local", ToolCallID: clientTool, Claimant: "tab", LeaseSeconds: 0})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tb.fingerprint(t)
			err := tc.call()
			if pgErr := requireSQLState(t, err, tc.code); !strings.Contains(pgErr.Message, tc.message) {
				t.Errorf("message %q, want it to say %q", pgErr.Message, tc.message)
			}
			if tb.fingerprint(t) != before {
				t.Error("the refused call changed something")
			}
		})
	}

	// What the schema allows, for contrast: an integer output, null, and a
	// question's choice.
	for _, a := range []struct {
		call   uuid.UUID
		answer string
	}{{clientTool, `{"output": "3"}`}, {question, `{"answer": "b"}`}} {
		if err := tb.answer(ctx, a.call, a.answer); err != nil {
			t.Errorf("answer %s: %v", a.answer, err)
		}
	}
}

// TestPauseQuotaAndFairSlots: a waiting prompt is in flight for the quota
// (it is unfinished), but holds no slot (its owner is served as one who
// holds nothing) and is not in the queue's metrics.
func TestPauseQuotaAndFairSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	tb.paused(t, "approval", `{}`)
	// Nor is it in the queue's metrics: no worker can take it.
	if st, err := tb.store.PromptQueueStats(ctx); err != nil || st.Queued != 0 || st.Running != 0 || st.OldestQueued != 0 {
		t.Errorf("queue stats with a prompt waiting = %+v, %v; want empty", st, err)
	}
	tb.setCap(t, 1)
	_, err := tb.send(ctx, "local", uuid.Nil, 1)
	requireQuotaExceeded(t, err)
	tb.setCap(t, 0)

	// With every slot but the reserved ones taken, claim_prompts serves
	// only owners who hold nothing: local, whose other prompt waits, is
	// one.
	f := newFairQueue(tb)
	f.queue(t, "local", 1)
	if owners := f.claimMany(t, "w1", 1, 1); owners != "local" {
		t.Errorf("the reserved slot went to %q; want local, whose waiting prompt holds no slot", owners)
	}
}

// TestPauseWriteBatch pauses through write_batch: request_input and
// wait_prompt in one batch (no answer can have come yet, so it parks).
func TestPauseWriteBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r := tb.startReply(t)
	block, call := uuid.New(), uuid.New()
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	refused, err := tb.writeBatch(t, 1,
		batchOp{"op": "start_block", "prompt": r.promptID, "block": block, "type": "tool_use"},
		batchOp{"op": "end_block", "prompt": r.promptID, "block": block},
		batchOp{"op": "start_tool_call", "prompt": r.promptID, "block": block, "toolCall": call, "name": "delete_file", "input": map[string]any{}},
		batchOp{"op": "request_input", "prompt": r.promptID, "toolCall": call, "kind": "question",
			"request": map[string]any{"question": "Sure?"}, "expiresAt": later},
		batchOp{"op": "wait_prompt", "prompt": r.promptID},
	)
	if err != nil || len(refused) != 0 {
		t.Fatalf("write_batch = %+v, %v", refused, err)
	}
	if p := tb.promptRow(t, r.promptID); !p.Waiting || p.Worker != nil {
		t.Fatalf("prompt after the batch = %+v; want parked", p)
	}
	inputs, err := tb.api.PromptInputs(ctx, r.promptID)
	if err != nil || len(inputs) != 1 || inputs[0].ExpiresAt == nil || inputs[0].Kind != "question" {
		t.Fatalf("prompt_inputs = %+v, %v", inputs, err)
	}

	// A malformed op refuses its prompt only, naming the field.
	r2 := tb.startReply(t)
	call2 := tb.toolCall(t, r2.promptID, "x")
	refused, err = tb.writeBatch(t, 2,
		batchOp{"op": "request_input", "prompt": r2.promptID, "toolCall": call2, "kind": "approval", "expiresAt": "tomorrow"},
	)
	if err != nil || len(refused) != 1 || refused[0].Code != sqlstate.InvalidArgument || !strings.Contains(refused[0].Message, `"expiresAt"`) {
		t.Fatalf("write_batch = %+v, %v", refused, err)
	}
	// A batch may not write a prompt that waits: no worker holds it.
	refused, err = tb.writeBatch(t, 3, batchOp{"op": "heartbeat", "prompt": r.promptID})
	if err != nil || len(refused) != 1 || !strings.Contains(refused[0].Message, "held by no worker") {
		t.Fatalf("write_batch = %+v, %v", refused, err)
	}
}

// TestPauseCompaction: compaction keeps the events of pauses (they are
// not deltas).
func TestPauseCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r, call := tb.paused(t, "approval", `{}`)
	if err := tb.answer(ctx, call, `{"approved": true}`); err != nil {
		t.Fatal(err)
	}
	tb.claimOne(t)
	if err := tb.api.PromptStart(ctx, r.promptID); err != nil {
		t.Fatal(err)
	}
	text := tb.startBlock(t, r.promptID, "text")
	tb.append(t, text, "Deleted ")
	tb.append(t, text, "it.")
	if err := tb.api.PromptComplete(ctx, r.promptID); err != nil {
		t.Fatal(err)
	}
	before := kinds(tb.events(t, r.conversationID))
	var removed int
	if err := tb.pool.QueryRow(ctx, `SELECT convo.compact_prompt($1)`, r.promptID).Scan(&removed); err != nil || removed != 1 {
		t.Fatalf("compact_prompt = %d, %v; want 1", removed, err)
	}
	after := kinds(tb.events(t, r.conversationID))
	for _, kind := range []string{"inputRequested", "promptWaiting", "inputAnswered"} {
		if slices.Index(before, kind) < 0 || !slices.Contains(after, kind) {
			t.Errorf("%s before compaction: %v, after: %v", kind, before, after)
		}
	}
}

// TestPauseMigrationDown rolls 00014_pauses.sql back with a prompt
// waiting (it fails: it cannot wait without the migration) and another
// queued (claimed by the functions as they were), and forward again.
func TestPauseMigrationDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tb := setupDSN(t, dsn)
	r, _ := tb.paused(t, "approval", `{}`)
	queued := tb.sendMessage(t, uuid.Nil, "next")

	provider := migrations(t, dsn)
	if _, err := provider.DownTo(ctx, 13); err != nil {
		t.Fatalf("down to 13: %v", err)
	}
	var status, errText string
	if err := tb.pool.QueryRow(ctx, `SELECT status, coalesce(error, '') FROM convo.prompts WHERE id = $1`, r.promptID).Scan(&status, &errText); err != nil {
		t.Fatal(err)
	}
	if status != "failed" || !strings.Contains(errText, "waited for an answer") {
		t.Errorf("the waiting prompt after down: %s %q; want failed", status, errText)
	}
	var stale []string
	if err := tb.pool.QueryRow(ctx, `SELECT coalesce(array_agg(proname ORDER BY proname), '{}') FROM pg_proc
		WHERE pronamespace = 'convo'::regnamespace AND (prosrc ~ 'input_request' OR prosrc ~ '\.waiting\M')`).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Errorf("after down, functions still use what 00014 added: %v", stale)
	}
	// Today's claim query reads what 00014 added (a resumed prompt): the
	// schema of 13 is claimed from in SQL, as a worker of its time did.
	var claimed uuid.UUID
	if err := tb.pool.QueryRow(ctx, `SELECT prompt_id FROM convo.claim_prompt('w1', 30)`).Scan(&claimed); err != nil || claimed != queued.promptID {
		t.Fatalf("claim after down = %v, %v; want the queued prompt", claimed, err)
	}
	if err := tb.api.PromptStart(ctx, queued.promptID); err != nil {
		t.Fatal(err)
	}
	if err := tb.api.PromptComplete(ctx, queued.promptID); err != nil {
		t.Fatal(err)
	}

	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatalf("up: %v", err)
	}
	r2, call := tb.paused(t, "question", `{"question": "Again?"}`)
	if err := tb.answer(ctx, call, `{"answer": "yes"}`); err != nil {
		t.Fatal(err)
	}
	if c := tb.claimOne(t); c.PromptID != r2.promptID {
		t.Errorf("claim after up = %+v; want the resumed prompt", c)
	}
}
