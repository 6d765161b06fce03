package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/internal/pgtest/apiq"
	"github.com/convo-dev/convo/postgres"
)

// listenPrompts opens a connection to tb's database that listens on
// convo_prompts, and returns a function that returns the payloads heard
// until none came for a while.
func listenPrompts(t *testing.T, tb *testBundle) func() []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, tb.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN convo_prompts"); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		var payloads []string
		for {
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			n, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				return payloads
			}
			payloads = append(payloads, n.Payload)
		}
	}
}

func demoConfigs() []json.RawMessage { return []json.RawMessage{json.RawMessage(`{"model":"demo"}`)} }

// TestSendMessagesShareTransactions sends 1,000 messages at once, some of
// which are refused (past the owner's cap on prompts, a parent that is
// not the active leaf, a deleted conversation, an unknown file): every
// caller gets its own answer, the refused ones write nothing and fail no
// other, the sends share a few transactions, and each transaction that
// queued prompts notifies the workers once.
func TestSendMessagesShareTransactions(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	if err := tb.store.SetMaxActivePrompts(ctx, 3); err != nil {
		t.Fatal(err)
	}
	// A conversation whose active leaf the bad-parent sends do not name.
	parentConv, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "parent", Text: "first", ModelConfigs: demoConfigs()})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "gone", Text: "first", ModelConfigs: demoConfigs()})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.store.DeleteConversation(ctx, "gone", deleted.ConversationID); err != nil {
		t.Fatal(err)
	}
	parentMessages := tb.count(t, "SELECT count(*) FROM convo.messages WHERE conversation_id = $1", parentConv.ConversationID)
	heard := listenPrompts(t, tb)
	before := tb.store.SendStats()

	type caller struct {
		kind string // ok, quota, parent, deleted, file
		p    conversation.SendMessageParams
		res  conversation.SendMessageResult
		err  error
	}
	var callers []*caller
	add := func(kind string, n int, p func(i int) conversation.SendMessageParams) {
		for i := range n {
			callers = append(callers, &caller{kind: kind, p: p(i)})
		}
	}
	add("ok", 900, func(i int) conversation.SendMessageParams {
		return conversation.SendMessageParams{OwnerID: fmt.Sprintf("user-%d", i), Text: fmt.Sprintf("hello %d", i), ModelConfigs: demoConfigs()}
	})
	add("quota", 25, func(i int) conversation.SendMessageParams {
		return conversation.SendMessageParams{OwnerID: "greedy", Text: fmt.Sprintf("more %d", i), ModelConfigs: demoConfigs()}
	})
	add("parent", 25, func(i int) conversation.SendMessageParams {
		return conversation.SendMessageParams{OwnerID: "parent", ConversationID: parentConv.ConversationID, Text: "below",
			ParentMessageID: uuid.New(), ModelConfigs: demoConfigs()}
	})
	add("deleted", 25, func(i int) conversation.SendMessageParams {
		return conversation.SendMessageParams{OwnerID: "gone", ConversationID: deleted.ConversationID, Text: "again", ModelConfigs: demoConfigs()}
	})
	add("file", 25, func(i int) conversation.SendMessageParams {
		return conversation.SendMessageParams{OwnerID: fmt.Sprintf("filer-%d", i), Text: "see the file",
			FileIDs: []uuid.UUID{uuid.New()}, ModelConfigs: demoConfigs()}
	})
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Go(func() {
			<-start
			c.res, c.err = tb.store.SendMessage(ctx, c.p)
		})
	}
	close(start)
	wg.Wait()
	after := tb.store.SendStats()

	quotaSent := 0
	seen := map[uuid.UUID]bool{}
	for _, c := range callers {
		code := conversation.ErrorCode(c.err)
		switch {
		case c.kind == "ok" || (c.kind == "quota" && c.err == nil):
			if c.err != nil {
				t.Errorf("%s's send failed: %v", c.p.OwnerID, c.err)
				continue
			}
			if c.kind == "quota" {
				quotaSent++
			}
			if seen[c.res.ConversationID] || len(c.res.PromptIDs) != 1 || len(c.res.AssistantMessageIDs) != 1 {
				t.Errorf("%s got %+v: want a conversation of its own and one prompt", c.p.OwnerID, c.res)
				continue
			}
			seen[c.res.ConversationID] = true
			// The caller's answer is its own send: its owner, its text.
			var owner, text string
			if err := tb.pool.QueryRow(ctx, `SELECT c.owner_id, b.content FROM convo.messages m
				JOIN convo.conversations c ON c.id = m.conversation_id JOIN convo.blocks b ON b.message_id = m.id
				WHERE m.id = $1`, c.res.UserMessageID).Scan(&owner, &text); err != nil {
				t.Fatalf("%s's message %s: %v", c.p.OwnerID, c.res.UserMessageID, err)
			}
			if owner != c.p.OwnerID || text != c.p.Text {
				t.Errorf("%s was answered with the message of %s (%q), not its own (%q)", c.p.OwnerID, owner, text, c.p.Text)
			}
		case c.kind == "quota":
			if code != conversation.ResourceExhausted || !strings.Contains(conversation.ErrorMessage(c.err), "max_active_prompts") {
				t.Errorf("a send past the cap: %v (%s), want resource_exhausted naming max_active_prompts", c.err, code)
			}
		case c.kind == "parent":
			if code != conversation.FailedPrecondition || !strings.Contains(conversation.ErrorMessage(c.err), c.p.ParentMessageID.String()) {
				t.Errorf("a send below a parent that is not the leaf: %v (%s), want failed_precondition naming it", c.err, code)
			}
		case c.kind == "deleted":
			if code != conversation.NotFound || !strings.Contains(conversation.ErrorMessage(c.err), deleted.ConversationID.String()) {
				t.Errorf("a send to a deleted conversation: %v (%s), want not_found naming it", c.err, code)
			}
		case c.kind == "file":
			if code != conversation.NotFound || !strings.Contains(conversation.ErrorMessage(c.err), c.p.FileIDs[0].String()) {
				t.Errorf("a send of an unknown file: %v (%s), want not_found naming the file", c.err, code)
			}
		}
	}
	if quotaSent != 3 {
		t.Errorf("%d of greedy's sends went through, want its cap of 3", quotaSent)
	}
	// Nothing refused was written.
	if n := tb.count(t, "SELECT count(*) FROM convo.conversations WHERE owner_id = 'greedy'"); n != 3 {
		t.Errorf("greedy has %d conversations, want 3", n)
	}
	if n := tb.count(t, "SELECT count(*) FROM convo.messages WHERE conversation_id = $1", parentConv.ConversationID); n != parentMessages {
		t.Errorf("the conversation the bad parents named has %d messages, want the %d it had", n, parentMessages)
	}
	if n := tb.count(t, "SELECT count(*) FROM convo.conversations WHERE owner_id LIKE 'filer-%' OR owner_id = 'gone'"); n != 0 {
		t.Errorf("%d conversations of sends with unknown files or to a deleted conversation were written", n)
	}
	if n := tb.count(t, "SELECT count(*) FROM convo.prompts WHERE owner_id LIKE 'user-%' OR owner_id = 'greedy'"); n != 903 {
		t.Errorf("%d prompts of the sends that went through, want 903", n)
	}
	// A few shared transactions, one notification each.
	groups := after.Groups - before.Groups
	if sent := after.Sent - before.Sent; sent != 903 {
		t.Errorf("SendStats counted %d sends, want 903", sent)
	}
	if groups > 250 {
		t.Errorf("1,000 sends at once took %d transactions; want them grouped (at most 250)", groups)
	}
	payloads := heard()
	for _, p := range payloads {
		if p != "queued:*" {
			t.Errorf("convo_prompts payload %q, want queued:*", p)
		}
	}
	if len(payloads) == 0 || int64(len(payloads)) > groups {
		t.Errorf("%d notifications of convo_prompts for %d transactions; want at least one and at most one per transaction", len(payloads), groups)
	}
	t.Logf("1,000 sends: %d transactions, %d notifications of convo_prompts", groups, len(payloads))
}

// TestSendMessageAloneGoesAtOnce: a send when nothing else is being sent
// is written at once, in a transaction of its own, and wakes the hook.
func TestSendMessageAloneGoesAtOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	woken := make(chan struct{}, 10)
	tb.store.OnPromptsQueued(func() { woken <- struct{}{} })
	before := tb.store.SendStats()
	began := time.Now()
	if _, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "local", Text: "alone", ModelConfigs: demoConfigs()}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if got := tb.store.SendStats().Groups - before.Groups; got != 1 {
		t.Errorf("a lone send took %d transactions, want 1", got)
	}
	// Loose: a send waits for no timer, only for its commit.
	if took > 2*time.Second {
		t.Errorf("a lone send took %v", took)
	}
	select {
	case <-woken:
	default:
		t.Error("the hook was not called for the prompt the send queued")
	}
	// A refused send queues nothing, and wakes nothing.
	_, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "local", ConversationID: uuid.New(), Text: "x", ModelConfigs: demoConfigs()})
	if conversation.ErrorCode(err) != conversation.NotFound {
		t.Fatalf("a send to an unknown conversation: %v, want not_found", err)
	}
	select {
	case <-woken:
		t.Error("the hook was called for a refused send")
	default:
	}
}

// TestSendMessageRefusesPastPendingBound: while a group is held up, sends
// wait up to the bound; past it they are refused at once, Overloaded with
// a Retry-After, and nothing of theirs is written; every send accepted is
// written once the group goes on.
func TestSendMessageRefusesPastPendingBound(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	if err := tb.store.SetMaxPendingSends(5); err != nil {
		t.Fatal(err)
	}
	h := holdSends(t, tb)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range 5 {
		wg.Go(func() {
			_, errs[i] = tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: fmt.Sprintf("waiting-%d", i+1),
				Text: "queued", ModelConfigs: demoConfigs()})
		})
	}
	h.waitStats("five pending sends", func(s postgres.SendStats) bool { return s.Pending == 5 })
	for i := range 3 {
		_, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: fmt.Sprintf("refused-%d", i),
			Text: "too many", ModelConfigs: demoConfigs()})
		var e *conversation.Error
		if !errors.As(err, &e) || e.Code != conversation.ResourceExhausted || !e.Overloaded || e.RetryAfter <= 0 ||
			!strings.Contains(e.Message, "overloaded") {
			t.Fatalf("a send past the bound: %#v, want resource_exhausted, overloaded, with a retry-after", err)
		}
	}
	h.release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("accepted send %d failed: %v", i, err)
		}
	}
	if n := tb.count(t, "SELECT count(*) FROM convo.conversations WHERE owner_id LIKE 'refused-%'"); n != 0 {
		t.Errorf("%d conversations of refused sends were written", n)
	}
	if n := tb.count(t, "SELECT count(*) FROM convo.prompts WHERE owner_id LIKE 'waiting-%' OR owner_id = 'held'"); n != 7 {
		t.Errorf("%d prompts of the accepted sends, want 7", n)
	}
	if got := tb.store.SendStats().Overloaded; got != 3 {
		t.Errorf("SendStats counted %d sends refused as overloaded, want 3", got)
	}
}

// TestSendMessageCancelledWhileWaiting: a caller that gives up while its
// send waits for a group is dropped, and nothing of its send is written.
func TestSendMessageCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	h := holdSends(t, tb)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := tb.store.SendMessage(cctx, conversation.SendMessageParams{OwnerID: "gave-up", Text: "never mind", ModelConfigs: demoConfigs()})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a send whose context ended while it waited: %v, want deadline exceeded", err)
	}
	if got := tb.store.SendStats().Pending; got != 0 {
		t.Errorf("%d sends still pending after the caller gave up", got)
	}
	h.release()
	if n := tb.count(t, "SELECT count(*) FROM convo.conversations WHERE owner_id = 'gave-up'"); n != 0 {
		t.Errorf("the send of a caller that gave up was written (%d conversations)", n)
	}
}

// TestSendMessagesBadTextFailsNoOther: text PostgreSQL cannot store (a NUL
// byte, which fails the whole statement before send_messages runs) in a
// group is refused as invalid, alone; the others of its group are sent.
func TestSendMessagesBadTextFailsNoOther(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	h := holdSends(t, tb)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		text := fmt.Sprintf("fine %d", i)
		if i == 2 {
			text = "nul \x00 byte"
		}
		wg.Go(func() {
			_, errs[i] = tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: fmt.Sprintf("text-%d", i), Text: text, ModelConfigs: demoConfigs()})
		})
	}
	h.waitStats("four pending sends", func(s postgres.SendStats) bool { return s.Pending == 4 })
	h.release()
	wg.Wait()
	for i, err := range errs {
		if i == 2 {
			if conversation.ErrorCode(err) != conversation.Invalid {
				t.Errorf("the send of a NUL byte: %v, want invalid", err)
			}
		} else if err != nil {
			t.Errorf("send %d of the group failed: %v", i, err)
		}
	}
	if n := tb.count(t, "SELECT count(*) FROM convo.conversations WHERE owner_id LIKE 'text-%'"); n != 3 {
		t.Errorf("%d conversations of the group, want the 3 sends of good text", n)
	}
}

// TestSendMessageSQLNotifiesEachPrompt: convo.send_message called alone
// (a client of the SQL API) still notifies 'queued:<prompt id>' per
// prompt; only send_messages gathers them into one 'queued:*'.
func TestSendMessageSQLNotifiesEachPrompt(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	heard := listenPrompts(t, tb)
	row, err := tb.api.MessageSend(context.Background(), apiq.MessageSendParams{OwnerID: "local", Text: "a or b?",
		ModelConfigs: json.RawMessage(`[{}, {}]`), FileIds: []uuid.UUID{}})
	if err != nil {
		t.Fatal(err)
	}
	got := heard()
	want := []string{"queued:" + row.PromptIds[0].String(), "queued:" + row.PromptIds[1].String()}
	if !slices.Equal(got, want) {
		t.Errorf("convo_prompts heard %v, want %v", got, want)
	}
}

// TestSendMessagesBurstAnsweredProgressively: sends that pile up behind a
// held group are written a few at a time once it goes on, not in one
// group that answers them all at its end: the first of them are answered
// while the others are still being written.
func TestSendMessagesBurstAnsweredProgressively(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	h := holdSends(t, tb)
	var wg sync.WaitGroup
	const burst = 40
	answered := make([]time.Time, burst)
	errs := make([]error, burst)
	for i := range burst {
		wg.Go(func() {
			_, errs[i] = tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: fmt.Sprintf("burst-%d", i),
				Text: "queued", ModelConfigs: demoConfigs()})
			answered[i] = time.Now()
		})
	}
	h.waitStats("the burst to queue", func(s postgres.SendStats) bool { return s.Pending == burst })
	before := tb.store.SendStats()
	h.release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("send %d of the burst: %v", i, err)
		}
	}
	groups := tb.store.SendStats().Groups - before.Groups
	if groups < 2 {
		t.Errorf("a burst of %d sends was written in %d group; want several, answered as each commits", burst, groups)
	}
	// Each group is answered as it commits: the burst's answers are
	// spread over its groups, not all at the end of one.
	slices.SortFunc(answered, time.Time.Compare)
	if !answered[0].Before(answered[burst-1]) {
		t.Errorf("every send of the burst was answered at once (%v)", answered[0])
	}
	if n := tb.count(t, "SELECT count(*) FROM convo.prompts WHERE owner_id LIKE 'burst-%'"); n != burst {
		t.Errorf("%d prompts of the burst, want %d", n, burst)
	}
	t.Logf("%d sends after a held group: %d groups, first answered %v before the last",
		burst, groups, answered[burst-1].Sub(answered[0]))
}

// heldSends holds up a store's sends: with one lane, one group at a time
// is written, and the group in flight waits on a conversation's row lock
// that a transaction of the test holds, so every send made meanwhile
// waits in the queue until release.
type heldSends struct {
	t    *testing.T
	tb   *testBundle
	tx   pgx.Tx
	done chan error
}

// holdSends sends one message, then a second to the same conversation
// while its row is locked, and returns once that second send's group is
// in flight (two groups started, none pending).
func holdSends(t *testing.T, tb *testBundle) *heldSends {
	t.Helper()
	postgres.SetSendLanes(tb.store, 1)
	ctx := context.Background()
	held, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "held", Text: "first", ModelConfigs: demoConfigs()})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM convo.conversations WHERE id = $1 FOR UPDATE", held.ConversationID); err != nil {
		t.Fatal(err)
	}
	h := &heldSends{t: t, tb: tb, tx: tx, done: make(chan error, 1)}
	go func() {
		_, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "held", ConversationID: held.ConversationID,
			Text: "second", ModelConfigs: demoConfigs()})
		h.done <- err
	}()
	h.waitStats("the held group", func(s postgres.SendStats) bool { return s.Groups >= 2 && s.Pending == 0 })
	return h
}

// waitStats waits up to 10 s for the store's SendStats to satisfy ok.
func (h *heldSends) waitStats(what string, ok func(postgres.SendStats) bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(h.tb.store.SendStats()) {
		if time.Now().After(deadline) {
			h.t.Fatalf("waited 10s for %s: %+v", what, h.tb.store.SendStats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// release lets the held group go on (the sends queued behind it follow)
// and waits for the held send, failing the test if it failed.
func (h *heldSends) release() {
	h.t.Helper()
	if err := h.tx.Rollback(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	if err := <-h.done; err != nil {
		h.t.Fatalf("the held send: %v", err)
	}
}

// TestSendMessageWrittenAgainAfterADeadlock: a send whose transaction
// PostgreSQL aborts as a deadlock's victim is written again, once its
// rival is gone, and its caller gets the send's answer, not the
// deadlock. The rival is a transaction of its own (as an upgrade's
// migrations are, docs/deploy.md): it holds the conversation's row while
// the send, holding the owner's quota lock, waits for it; then it asks
// for the quota lock, and PostgreSQL aborts the send, which waited first.
func TestSendMessageWrittenAgainAfterADeadlock(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	if err := tb.store.SetMaxActivePrompts(ctx, 10); err != nil { // the quota's advisory lock
		t.Fatal(err)
	}
	first, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{OwnerID: "deadlock", Text: "one", ModelConfigs: demoConfigs()})
	if err != nil {
		t.Fatal(err)
	}
	tb.answerWith(t, first.PromptIDs[0], "re: one")

	rival, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Rollback(ctx) //nolint:errcheck
	if _, err := rival.Exec(ctx, `SELECT 1 FROM convo.conversations WHERE id = $1 FOR UPDATE`, first.ConversationID); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res conversation.SendMessageResult
		err error
	}
	sent := make(chan answer, 1)
	go func() {
		res, err := tb.store.SendMessage(ctx, conversation.SendMessageParams{
			OwnerID: "deadlock", ConversationID: first.ConversationID, Text: "two", ModelConfigs: demoConfigs(),
		})
		sent <- answer{res, err}
	}()
	// The send waits for the conversation's row, the quota lock held.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := tb.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
			  AND pid IN (SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'))`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the send never waited for the conversation's row")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The cycle: PostgreSQL aborts the send (it waited first), and the
	// rival gets the quota lock.
	if _, err := rival.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('convo.active_prompts:' || 'deadlock', 0))`); err != nil {
		t.Fatalf("the rival was aborted, not the send: %v", err)
	}
	if err := rival.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-sent
	if a.err != nil {
		t.Fatalf("the send after its deadlock: %v", a.err)
	}
	var n int
	if err := tb.pool.QueryRow(ctx, `SELECT count(*) FROM convo.messages m JOIN convo.blocks b ON b.message_id = m.id
		WHERE m.conversation_id = $1 AND m.role = 'user' AND b.content = 'two'`, first.ConversationID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 || a.res.UserMessageID == uuid.Nil {
		t.Errorf("the send is written %d times (answered %s), want once", n, a.res.UserMessageID)
	}
}
