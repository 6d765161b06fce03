package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
)

// The send policies (convo.send_message's convo.send_policy,
// set_send_policy, _release_turn, delete_queued_message): what a send does
// while a reply of its conversation is in flight.

// sendWith sends text into conversationID as "local" with policy.
func (tb *testBundle) sendWith(t testing.TB, conversationID uuid.UUID, text string, policy conversation.SendPolicy) (conversation.SendMessageResult, error) {
	t.Helper()
	return tb.store.SendMessage(context.Background(), conversation.SendMessageParams{
		OwnerID: "local", ConversationID: conversationID, Text: text,
		ModelConfigs: []json.RawMessage{json.RawMessage(`{"model":"demo"}`)}, Policy: policy,
	})
}

// enqueue sends text with the enqueue policy, failing the test unless the
// send was queued.
func (tb *testBundle) enqueue(t testing.TB, conversationID uuid.UUID, text string) conversation.SendMessageResult {
	t.Helper()
	res, err := tb.sendWith(t, conversationID, text, conversation.SendPolicyEnqueue)
	if err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
	if !res.Queued {
		t.Fatalf("send %q was not queued behind the reply in flight", text)
	}
	return res
}

// claimable claims everything claimable as worker w2 and returns the ids,
// in claim order.
func (tb *testBundle) claimable(t testing.TB) []uuid.UUID {
	t.Helper()
	rows, err := tb.api.PromptClaimMany(context.Background(), apiq.PromptClaimManyParams{Worker: "w2", LeaseSeconds: 30, MaxPrompts: 100})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.PromptID
	}
	return ids
}

// message is the message id of the conversation's state.
func message(t testing.TB, st conversation.State, id uuid.UUID) conversation.Message {
	t.Helper()
	for _, m := range st.Messages {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("message %s is not in the conversation's path", id)
	return conversation.Message{}
}

// TestEnqueueWaitsForTheRunningReply: a message sent while a reply runs
// (the server's default policy, enqueue) is written at once, marked
// queued, and its reply is neither claimable nor startable until the
// running one completes; then it is, in the transaction that completed it.
func TestEnqueueWaitsForTheRunningReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r1 := tb.startReply(t)
	// No policy named: the server's default, enqueue.
	res, err := tb.sendWith(t, r1.conversationID, "second", conversation.SendPolicyDefault)
	if err != nil || !res.Queued {
		t.Fatalf("send while a reply runs: %+v, %v; want queued", res, err)
	}
	if got := tb.claimable(t); len(got) != 0 {
		t.Fatalf("claimed %v while the first reply runs: two replies of one conversation at once", got)
	}
	requireSQLState(t, tb.api.PromptStart(ctx, res.PromptIDs[0]), "CV002")
	st := tb.state(t, r1.conversationID)
	if u, a := message(t, st, res.UserMessageID), message(t, st, res.AssistantMessageIDs[0]); !u.Queued || !a.Queued || a.ParentID.UUID != u.ID {
		t.Errorf("queued send in the state: user %+v, reply %+v", u, a)
	}
	if st.Conversation.ActivePromptID.UUID != r1.promptID {
		t.Errorf("active prompt %v, want the running %s", st.Conversation.ActivePromptID, r1.promptID)
	}

	if err := tb.api.PromptComplete(ctx, r1.promptID); err != nil {
		t.Fatal(err)
	}
	if got := tb.claimable(t); len(got) != 1 || got[0] != res.PromptIDs[0] {
		t.Fatalf("claimed %v after the first reply completed, want %s", got, res.PromptIDs[0])
	}
	st = tb.state(t, r1.conversationID)
	if u, a := message(t, st, res.UserMessageID), message(t, st, res.AssistantMessageIDs[0]); u.Queued || a.Queued {
		t.Errorf("after its turn came: user queued %v, reply queued %v", u.Queued, a.Queued)
	}
	if st.Conversation.ActivePromptID.UUID != res.PromptIDs[0] {
		t.Errorf("active prompt %v, want the released %s", st.Conversation.ActivePromptID, res.PromptIDs[0])
	}
	// The turn's events: the prompt's end, then the queued send's
	// messages updated (queued unset), then the active prompt.
	events := tb.events(t, r1.conversationID)
	got := kinds(events[len(events)-5:])
	want := []string{"promptCompleted", "messageUpdated", "messageUpdated", "messageUpdated", "conversationUpdated"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("events of the turn: %v, want %v", got, want)
	}
}

// TestEnqueueKeepsTheOrderOfThree: three messages queued behind a
// running reply are answered one at a time, in the order they were sent.
func TestEnqueueKeepsTheOrderOfThree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r1 := tb.startReply(t)
	var queued []conversation.SendMessageResult
	for _, text := range []string{"one", "two", "three"} {
		queued = append(queued, tb.enqueue(t, r1.conversationID, text))
	}
	previous := r1.promptID
	for i, q := range queued {
		if err := tb.api.PromptComplete(ctx, previous); err != nil {
			t.Fatalf("complete %s: %v", previous, err)
		}
		got := tb.claimable(t)
		if len(got) != 1 || got[0] != q.PromptIDs[0] {
			t.Fatalf("after reply %d ended: claimed %v, want only queued send %d's %s", i, got, i, q.PromptIDs[0])
		}
		if err := tb.api.PromptStart(ctx, got[0]); err != nil {
			t.Fatal(err)
		}
		previous = got[0]
	}
	// The path is the order of the sends, each reply below its message.
	st := tb.state(t, r1.conversationID)
	var texts []string
	for _, m := range st.Messages {
		if m.Role == conversation.RoleUser {
			texts = append(texts, m.Blocks[0].Content)
		}
	}
	if strings.Join(texts, ",") != "hello,one,two,three" {
		t.Errorf("user messages in path order: %v", texts)
	}
}

// TestEnqueueKeepsTheOrderOfOneTransaction: sends queued together, in
// one transaction (send_messages, as the server's group commit writes
// them), share their prompts' created_at; their replies still take the
// turn in the order the messages were sent.
func TestEnqueueKeepsTheOrderOfOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r1 := tb.startReply(t)
	const n = 8
	owners, convs, texts, configs, parents, files := make([]string, n), make([]uuid.UUID, n), make([]string, n),
		make([]string, n), make([]*uuid.UUID, n), make([]string, n)
	for i := range n {
		owners[i], convs[i], texts[i], configs[i], files[i] = "local", r1.conversationID, fmt.Sprintf("send %d", i), "[{}]", "{}"
	}
	rows, err := tb.pool.Query(ctx, `SELECT s.prompt_ids[1], s.queued, s.error_message
		  FROM convo.send_messages($1::text[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::text[]) s ORDER BY s.ord`,
		owners, convs, texts, configs, parents, files)
	if err != nil {
		t.Fatal(err)
	}
	var prompts []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		var queued *bool
		var failed *string
		if err := rows.Scan(&id, &queued, &failed); err != nil {
			t.Fatal(err)
		}
		if failed != nil || queued == nil || !*queued {
			t.Fatalf("send %d: queued %v, error %v; want queued", len(prompts), queued, failed)
		}
		prompts = append(prompts, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	previous := r1.promptID
	for i, want := range prompts {
		if err := tb.api.PromptComplete(ctx, previous); err != nil {
			t.Fatalf("complete %s: %v", previous, err)
		}
		got := tb.claimable(t)
		if len(got) != 1 || got[0] != want {
			t.Fatalf("after reply %d ended: claimed %v, want only send %d's %s", i, got, i, want)
		}
		if err := tb.api.PromptStart(ctx, got[0]); err != nil {
			t.Fatal(err)
		}
		previous = got[0]
	}
}

// TestQueuedReplyStartsWhenTheRunningOneEnds: every way a reply ends
// hands the turn on: complete in a worker's batch, fail, a client's
// cancel, and the expiry of the worker's lease.
func TestQueuedReplyStartsWhenTheRunningOneEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ends := map[string]func(t *testing.T, tb *testBundle, r reply){
		"Batch": func(t *testing.T, tb *testBundle, r reply) {
			rows, err := tb.writeBatch(t, 1, batchOp{"op": "complete_prompt", "prompt": r.promptID})
			if err != nil || len(rows) != 0 {
				t.Fatalf("batch: %+v, %v", rows, err)
			}
		},
		"Fail": func(t *testing.T, tb *testBundle, r reply) {
			if err := tb.api.PromptFail(ctx, apiq.PromptFailParams{PromptID: r.promptID, Error: "model error"}); err != nil {
				t.Fatal(err)
			}
		},
		"Cancel": func(t *testing.T, tb *testBundle, r reply) {
			if _, err := tb.store.CancelPrompt(ctx, "local", r.promptID); err != nil {
				t.Fatal(err)
			}
		},
		"LeaseExpiry": func(t *testing.T, tb *testBundle, r reply) {
			if _, err := tb.pool.Exec(ctx, `UPDATE convo.prompts SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, r.promptID); err != nil {
				t.Fatal(err)
			}
			// The claim below reaps it (expire_leases) first.
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			r1 := tb.startReply(t)
			q := tb.enqueue(t, r1.conversationID, "next")
			if got := tb.claimable(t); len(got) != 0 {
				t.Fatalf("claimed %v before the running reply ended", got)
			}
			end(t, tb, r1)
			if got := tb.claimable(t); len(got) != 1 || got[0] != q.PromptIDs[0] {
				t.Fatalf("claimed %v after the running reply ended, want %s", got, q.PromptIDs[0])
			}
		})
	}
}

// TestRejectRefusesWhileAReplyIsInFlight: reject refuses, naming the
// prompt in flight, and writes nothing, whether the reply runs or only
// waits for a worker; with nothing in flight it sends.
func TestRejectRefusesWhileAReplyIsInFlight(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	queued := tb.sendMessage(t, uuid.Nil, "first")
	for _, running := range []bool{false, true} {
		if running {
			tb.claimAs(t, "w1", queued.promptID)
			if err := tb.api.PromptStart(context.Background(), queued.promptID); err != nil {
				t.Fatal(err)
			}
		}
		before := tb.fingerprint(t)
		_, err := tb.sendWith(t, queued.conversationID, "again", conversation.SendPolicyReject)
		if conversation.ErrorCode(err) != conversation.FailedPrecondition {
			t.Fatalf("running %v: reject while a reply is in flight: %v, want failed_precondition", running, err)
		}
		if msg := conversation.ErrorMessage(err); !strings.Contains(msg, "a reply is running") || !strings.Contains(msg, queued.promptID.String()) {
			t.Errorf("message %q does not say a reply runs, naming its prompt", msg)
		}
		if after := tb.fingerprint(t); after != before {
			t.Errorf("a rejected send changed:\n%s\n%s", before, after)
		}
	}
	if err := tb.api.PromptComplete(context.Background(), queued.promptID); err != nil {
		t.Fatal(err)
	}
	if res, err := tb.sendWith(t, queued.conversationID, "now", conversation.SendPolicyReject); err != nil || res.Queued {
		t.Errorf("reject with nothing in flight: %+v, %v", res, err)
	}
}

// TestInterruptCancelsWhatIsInFlight: interrupt cancels the running reply
// (its partial text kept) and the queued sends' replies (their messages
// stay, no longer queued), and the new message's reply is claimable at
// once.
func TestInterruptCancelsWhatIsInFlight(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	r1 := tb.startReply(t)
	block := tb.startBlock(t, r1.promptID, "text")
	tb.append(t, block, "partial")
	q := tb.enqueue(t, r1.conversationID, "queued")
	res, err := tb.sendWith(t, r1.conversationID, "stop, do this", conversation.SendPolicyInterrupt)
	if err != nil || res.Queued {
		t.Fatalf("interrupt: %+v, %v", res, err)
	}
	st := tb.state(t, r1.conversationID)
	if m := message(t, st, r1.messageID); m.Status != conversation.MessageCancelled || len(m.Blocks) != 1 || m.Blocks[0].Content != "partial" {
		t.Errorf("interrupted reply: %+v", m)
	}
	if u, a := message(t, st, q.UserMessageID), message(t, st, q.AssistantMessageIDs[0]); u.Queued || a.Queued || a.Status != conversation.MessageCancelled {
		t.Errorf("queued send after the interrupt: user %+v, reply %+v", u, a)
	}
	if got := tb.claimable(t); len(got) != 1 || got[0] != res.PromptIDs[0] {
		t.Errorf("claimed %v after the interrupt, want the new %s", got, res.PromptIDs[0])
	}
	if st.Conversation.ActivePromptID.UUID != res.PromptIDs[0] {
		t.Errorf("active prompt %v, want %s", st.Conversation.ActivePromptID, res.PromptIDs[0])
	}
}

// TestCancelQueuedReply: cancelling a queued send's reply takes its
// message out of the queue and leaves the running reply alone; when that
// one ends, no cancelled reply starts.
func TestCancelQueuedReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r1 := tb.startReply(t)
	q := tb.enqueue(t, r1.conversationID, "never mind")
	if ok, err := tb.store.CancelPrompt(ctx, "local", q.PromptIDs[0]); err != nil || !ok {
		t.Fatalf("cancel the queued reply: %v, %v", ok, err)
	}
	st := tb.state(t, r1.conversationID)
	if u := message(t, st, q.UserMessageID); u.Queued {
		t.Error("the user message stays queued after its reply was cancelled")
	}
	if m := message(t, st, r1.messageID); m.Status != conversation.MessageProcessing {
		t.Errorf("running reply: %s", m.Status)
	}
	if err := tb.api.PromptComplete(ctx, r1.promptID); err != nil {
		t.Fatal(err)
	}
	if got := tb.claimable(t); len(got) != 0 {
		t.Errorf("claimed %v: a cancelled reply started", got)
	}
}

// TestDeleteQueuedMessage: a queued send is taken back with its reply
// before its turn, the sends queued after it moving up (below its
// parent); after its turn came, or for a message never queued, it is
// refused, changing nothing; another owner's is not found.
func TestDeleteQueuedMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r1 := tb.startReply(t)
	q2 := tb.enqueue(t, r1.conversationID, "two")
	q3 := tb.enqueue(t, r1.conversationID, "three")

	// Another owner's message answers as an unknown one.
	for _, id := range []uuid.UUID{q2.UserMessageID, uuid.New()} {
		before := tb.fingerprint(t)
		_, err := tb.store.DeleteQueuedMessage(ctx, "mallory", id)
		if conversation.ErrorCode(err) != conversation.NotFound {
			t.Errorf("delete as another owner: %v, want not_found", err)
		}
		if tb.fingerprint(t) != before {
			t.Error("a refused delete changed something")
		}
	}
	// A reply's message, and a message never queued.
	for _, id := range []uuid.UUID{q2.AssistantMessageIDs[0], r1.messageID} {
		before := tb.fingerprint(t)
		if _, err := tb.store.DeleteQueuedMessage(ctx, "local", id); conversation.ErrorCode(err) != conversation.FailedPrecondition {
			t.Errorf("delete of %s: %v, want failed_precondition", id, err)
		}
		if tb.fingerprint(t) != before {
			t.Error("a refused delete changed something")
		}
	}

	conv, err := tb.store.DeleteQueuedMessage(ctx, "local", q2.UserMessageID)
	if err != nil || conv != r1.conversationID {
		t.Fatalf("delete queued message: %v, %v", conv, err)
	}
	if n := tb.count(t, `SELECT count(*) FROM convo.messages WHERE id = ANY($1)`, []uuid.UUID{q2.UserMessageID, q2.AssistantMessageIDs[0]}); n != 0 {
		t.Errorf("%d messages of the deleted send remain", n)
	}
	st := tb.state(t, r1.conversationID)
	if len(st.Messages) != 4 {
		t.Fatalf("path after the delete: %d messages, want hello, its reply, three, its reply", len(st.Messages))
	}
	if u := message(t, st, q3.UserMessageID); u.ParentID.UUID != r1.messageID || !u.Queued {
		t.Errorf("the later queued send: parent %v (want the running reply %s), queued %v", u.ParentID, r1.messageID, u.Queued)
	}
	events := tb.events(t, r1.conversationID)
	if last := events[len(events)-1]; last.Kind != conversation.EventBranchSwitched {
		t.Errorf("last event %s, want branchSwitched", last.Kind)
	}

	// The next queued send moves up: it starts when the running reply ends.
	if err := tb.api.PromptComplete(ctx, r1.promptID); err != nil {
		t.Fatal(err)
	}
	if got := tb.claimable(t); len(got) != 1 || got[0] != q3.PromptIDs[0] {
		t.Fatalf("claimed %v, want %s", got, q3.PromptIDs[0])
	}
	// Its turn came: too late to take it back.
	before := tb.fingerprint(t)
	_, err = tb.store.DeleteQueuedMessage(ctx, "local", q3.UserMessageID)
	if conversation.ErrorCode(err) != conversation.FailedPrecondition || !strings.Contains(conversation.ErrorMessage(err), "not queued") {
		t.Errorf("delete after its turn came: %v, want failed_precondition saying it is not queued", err)
	}
	if tb.fingerprint(t) != before {
		t.Error("a refused delete changed something")
	}
}

// TestSetSendPolicy: a conversation's policy applies to sends that name
// none, a send's own policy wins, unset returns to the server's
// (enqueue), and an unknown one is refused.
func TestSetSendPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	r1 := tb.startReply(t)
	conv, err := tb.store.SetSendPolicy(ctx, "local", r1.conversationID, conversation.SendPolicyReject)
	if err != nil || conv.SendPolicy != conversation.SendPolicyReject {
		t.Fatalf("set reject: %+v, %v", conv, err)
	}
	if _, err := tb.sendWith(t, r1.conversationID, "x", conversation.SendPolicyDefault); conversation.ErrorCode(err) != conversation.FailedPrecondition {
		t.Errorf("send naming no policy in a reject conversation: %v", err)
	}
	if res, err := tb.sendWith(t, r1.conversationID, "y", conversation.SendPolicyEnqueue); err != nil || !res.Queued {
		t.Errorf("send naming enqueue: %+v, %v", res, err)
	}
	for _, bad := range []conversation.SendPolicy{"later", "ENQUEUE"} {
		before := tb.fingerprint(t)
		if _, err := tb.store.SetSendPolicy(ctx, "local", r1.conversationID, bad); conversation.ErrorCode(err) != conversation.Invalid {
			t.Errorf("set %q: %v, want invalid", bad, err)
		}
		if _, err := tb.sendWith(t, r1.conversationID, "z", bad); conversation.ErrorCode(err) != conversation.Invalid {
			t.Errorf("send with %q: %v, want invalid", bad, err)
		}
		if tb.fingerprint(t) != before {
			t.Errorf("a refused policy %q changed something", bad)
		}
	}
	if _, err := tb.store.SetSendPolicy(ctx, "mallory", r1.conversationID, conversation.SendPolicyEnqueue); conversation.ErrorCode(err) != conversation.NotFound {
		t.Errorf("another owner sets the policy: %v", err)
	}
	conv, err = tb.store.SetSendPolicy(ctx, "local", r1.conversationID, conversation.SendPolicyDefault)
	if err != nil || conv.SendPolicy != conversation.SendPolicyDefault {
		t.Fatalf("unset: %+v, %v", conv, err)
	}
	if res, err := tb.sendWith(t, r1.conversationID, "w", conversation.SendPolicyDefault); err != nil || !res.Queued {
		t.Errorf("send naming no policy after unset: %+v, %v; want enqueued", res, err)
	}
}
