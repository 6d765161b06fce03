package conformance

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
)

// pauseState is where a paused prompt stands, as the database holds it.
type pauseState struct {
	status  string
	waiting bool
	// worker and leased say whether a worker still holds the prompt.
	worker string
	leased bool
	// pending are the prompt's pending input requests.
	pending []pendingInput
}

// pendingInput is one pending input request of the prompt.
type pendingInput struct {
	ToolCallID uuid.UUID `json:"toolCallId"`
	Kind       string    `json:"kind"`
}

// pauseState reads the prompt's waiting flag, holder and pending input
// requests in one statement, so that they agree.
func (run *scenarioRun) pauseState(promptID uuid.UUID) pauseState {
	t := run.t
	t.Helper()
	var s pauseState
	var pending []byte
	err := run.db.QueryRow(context.Background(), `
SELECT p.status, p.waiting, coalesce(p.worker, ''), p.lease_expires_at IS NOT NULL,
       coalesce((SELECT jsonb_agg(jsonb_build_object('toolCallId', i.tool_call_id, 'kind', i.kind) ORDER BY i.created_at)
                   FROM convo.input_requests i
                  WHERE i.prompt_id = p.id AND i.status = 'pending'), '[]')
  FROM convo.prompts p
 WHERE p.id = $1`, promptID).Scan(&s.status, &s.waiting, &s.worker, &s.leased, &pending)
	if err != nil {
		t.Fatalf("read the prompt's pause: %v", err)
	}
	if err := json.Unmarshal(pending, &s.pending); err != nil {
		t.Fatalf("decode the prompt's pending input requests: %v", err)
	}
	return s
}

// answerPause does approve and deny: it waits until the prompt waits for
// one pending approval, checks that no worker holds it, runs the
// scenario's whileWaiting script to its end (the slot is free), and then
// answers the request as the user, through the API's store.
func (run *scenarioRun) answerPause(r reply) {
	t, a := run.t, run.sc.Action
	t.Helper()
	s := run.waitWaiting(r)
	if len(s.pending) != 1 {
		t.Fatalf("the prompt waits with %d pending input requests %v, want one (the approval of the call)", len(s.pending), s.pending)
	}
	if s.pending[0].Kind != string(conversation.InputApproval) {
		t.Fatalf("the prompt waits for a %s request, want %s", s.pending[0].Kind, conversation.InputApproval)
	}
	if s.worker != "" || s.leased {
		t.Fatalf("the waiting prompt is still held (worker %q, lease %v): a pause must leave it to no worker", s.worker, s.leased)
	}
	run.checkPausedReply(r, s.pending[0].ToolCallID)
	if len(run.sc.WhileWaiting) > 0 {
		run.runWhileWaiting(r)
	}
	answer := map[string]any{"approved": a.Kind == ActionApprove}
	if a.Kind == ActionDeny {
		answer["reason"] = a.Reason
	}
	raw, err := json.Marshal(answer)
	if err != nil {
		t.Fatalf("encode the answer: %v", err)
	}
	_, err = run.store.AnswerInput(context.Background(), conversation.AnswerInputParams{
		OwnerID: owner, ToolCallID: s.pending[0].ToolCallID, Answer: raw,
	})
	if err != nil {
		t.Fatalf("answer the approval %s with %s: %v", s.pending[0].ToolCallID, raw, err)
	}
}

// checkPausedReply checks the reply as clients read it while it waits:
// every block ended, and the call that waits started (not run, not
// ended) on its tool_use block.
func (run *scenarioRun) checkPausedReply(r reply, toolCallID uuid.UUID) {
	t := run.t
	t.Helper()
	found := false
	for i, b := range run.client.message(t, r).GetBlocks() {
		if b.GetStatus() != "completed" {
			t.Errorf("while the prompt waits, block %d (%s) is %s: a pause ends every block of the round", i, describeGot(b), b.GetStatus())
		}
		tc := b.GetToolCall()
		if tc.GetId() != toolCallID.String() {
			continue
		}
		found = true
		if b.GetBlockType() != "tool_use" || tc.GetStatus() != "started" {
			t.Errorf("while the prompt waits, the call waiting for approval is %s on block %d (%s), want started on its tool_use block",
				tc.GetStatus(), i, describeGot(b))
		}
	}
	if !found {
		t.Errorf("while the prompt waits, no block of the reply carries the call %s that waits for approval", toolCallID)
	}
}

// waitWaiting waits until the prompt waits for input (prompts.waiting).
// A prompt that settles first fails the scenario.
func (run *scenarioRun) waitWaiting(r reply) pauseState {
	t := run.t
	t.Helper()
	deadline := time.Now().Add(actionTimeout)
	for {
		s := run.pauseState(r.promptID)
		if s.waiting {
			return s
		}
		if settled(s.status) {
			p := run.client.prompt(t, r.promptID)
			t.Fatalf("the prompt settled (%s, error %q) instead of waiting for the approval of its call", p.GetStatus(), p.GetError())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prompt is still %s, not waiting for input, %s after its text showed %q", s.status, actionTimeout, run.sc.Action.When)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runWhileWaiting sends the whileWaiting script in a new conversation and
// requires it to complete while the first prompt still waits: with one
// slot, only a runner whose pause freed the slot can run it.
func (run *scenarioRun) runWhileWaiting(paused reply) {
	t := run.t
	t.Helper()
	r := run.send(run.sc.WhileWaiting)
	run.waitSettled(r, settleTimeout)
	if got := run.client.prompt(t, r.promptID); got.GetStatus() != "completed" {
		t.Fatalf("whileWaiting: the prompt is %s (error %q), want completed while the paused prompt waits: the pause did not free the slot",
			got.GetStatus(), got.GetError())
	}
	if s := run.pauseState(paused.promptID); !s.waiting || s.worker != "" || s.leased {
		t.Fatalf("after whileWaiting the paused prompt is %s (waiting %v, worker %q, lease %v), want it still waiting, held by no worker",
			s.status, s.waiting, s.worker, s.leased)
	}
}
