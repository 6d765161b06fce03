package worker_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"

	. "github.com/convo-dev/convo/worker"
)

// TestPoolAsTheWorkerRole runs the runtime on a login of the worker role,
// which may only call the SQL worker API: a reply with a tool call, and an
// approval's whole round trip (the pause, then another pool resuming it,
// reading the answer and the reply so far). The role is enough for all a
// worker does.
func TestPoolAsTheWorkerRole(t *testing.T) {
	t.Parallel()

	t.Run("Reply", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.useWorkerRole(t)
		_, res := tb.start(t, Config{})
		first := tb.send(t, uuid.Nil, "What is 2+2?", `{"provider": "demo"}`)
		if r := res.wait(t, first.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("outcome %s (%v), want completed", r.Outcome, r.Err)
		}
		// A second turn reads the first as its context.
		second := tb.send(t, first.conversationID, "And 3+3?", `{"provider": "demo"}`)
		if r := res.wait(t, second.promptID, 20*time.Second); r.Outcome != OutcomeCompleted {
			t.Fatalf("the second turn: outcome %s (%v), want completed", r.Outcome, r.Err)
		}
		if m := tb.message(t, second); m.Status != conversation.MessageCompleted || len(m.Blocks) == 0 {
			t.Errorf("the second reply: %s with %d blocks", m.Status, len(m.Blocks))
		}
	})

	t.Run("Pause", func(t *testing.T) {
		t.Parallel()
		pb := setupPause(t, "delete_file", `{"path": "notes.txt"}`)
		pb.useWorkerRole(t)
		pb.pause(t, "approval")
		pb.answer(t, `{"approved": true}`)
		call := pb.resume(t, "deleted notes.txt", conversation.ToolCallCompleted)
		if call.Output != "deleted notes.txt" || pb.runs.Load() != 1 {
			t.Errorf("output %q, %d runs", call.Output, pb.runs.Load())
		}
	})
}
