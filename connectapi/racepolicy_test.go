package connectapi_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/gen/convo/v1/convov1connect"
	"github.com/convo-dev/convo/internal/testwait"
	"github.com/convo-dev/convo/worker"
)

// gates hold gatedModel's replies: each reply streams until the gate of
// the user message it answers opens.
type gates struct {
	mu     sync.Mutex
	byText map[string]chan struct{}
	opened map[string]bool
	all    bool // every gate open, those not made yet included
}

func newGates() *gates {
	return &gates{byText: map[string]chan struct{}{}, opened: map[string]bool{}}
}

// gate is the gate of the reply to the user message text.
func (g *gates) gate(text string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.byText[text]
	if !ok {
		c = make(chan struct{})
		g.byText[text] = c
		if g.all {
			close(c)
			g.opened[text] = true
		}
	}
	return c
}

// open lets the reply to text finish (at once, if it has not started).
func (g *gates) open(text string) {
	c := g.gate(text)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.opened[text] {
		close(c)
		g.opened[text] = true
	}
}

// isOpen reports whether the gate of text was opened.
func (g *gates) isOpen(text string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened[text] || g.all
}

// openAll lets every reply finish, now and from now on.
func (g *gates) openAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.all = true
	for text, c := range g.byText {
		if !g.opened[text] {
			close(c)
			g.opened[text] = true
		}
	}
}

// maxGatedTokens bounds a reply whose gate never opens (a test that
// failed half-way): about a minute of tokens, longer than any wait of
// the test.
const maxGatedTokens = 12000

// gatedModel answers "thinking" (a reasoning block), then the text
// tokens "w0 ", "w1 ", … one every perToken for as long as the gate of
// the user message it answers is closed, then "done". A cancelled reply
// stops where it is.
func gatedModel(g *gates, perToken time.Duration) worker.Model {
	return worker.ModelFunc(func(ctx context.Context, req worker.Request) iter.Seq2[worker.Event, error] {
		return func(yield func(worker.Event, error) bool) {
			var text string
			for _, m := range req.Messages {
				if m.Role == worker.RoleUser {
					text = m.Text
				}
			}
			gate := g.gate(text)
			if !yield(worker.Part{Index: 0, Chunk: worker.ReasoningChunk("thinking")}, nil) {
				return
			}
			for i := range maxGatedTokens {
				select {
				case <-ctx.Done():
					return
				case <-gate:
					if yield(worker.Part{Index: 1, Chunk: worker.MessageChunk("done")}, nil) {
						yield(worker.Finish{Reason: worker.FinishStop}, nil)
					}
					return
				case <-time.After(perToken):
				}
				if !yield(worker.Part{Index: 1, Chunk: worker.MessageChunk(fmt.Sprintf("w%d ", i))}, nil) {
					return
				}
			}
			yield(worker.Finish{Reason: worker.FinishStop}, nil)
		}
	})
}

// gatedText reports whether s is a text gatedModel writes: whole tokens
// "w0 w1 … wN " from the first, then "done" when the reply completed.
func gatedText(s string, completed bool) bool {
	if completed {
		var ok bool
		if s, ok = strings.CutSuffix(s, "done"); !ok {
			return false
		}
	}
	var want strings.Builder
	for i := 0; want.Len() < len(s); i++ {
		fmt.Fprintf(&want, "w%d ", i)
	}
	return want.String() == s
}

// textOf is the content of a message's text blocks.
func textOf(m *convov1.Message) string {
	var s strings.Builder
	for _, b := range m.GetBlocks() {
		if b.GetBlockType() == "text" {
			s.WriteString(b.GetContent())
		}
	}
	return s.String()
}

// raced is one of the owner's and the participant's sends released
// together.
type raced struct {
	who, text string
	res       *convov1.SendMessageResponse
	err       error
}

// namedSub is a subscriber and the user it streams as.
type namedSub struct {
	name, user string
	sub        *subscriber
}

// racingMembers is one conversation of alice's, with pat a participant
// and vic a viewer, answered by workers of gatedModel.
type racingMembers struct {
	t       *testing.T
	tb      *testBundle
	conv    string
	clients map[string]convov1connect.ConversationServiceClient
	gates   *gates
	subs    []namedSub

	mu       sync.Mutex
	outcomes map[string]worker.Outcome // by prompt id
}

// raceMembers makes the conversation, its first message ("the first
// message", whose reply is the first to run), sets its send policy,
// subscribes alice, pat and vic from before any reply starts, and starts
// two workers.
func raceMembers(t *testing.T, policy convov1.SendPolicy) *racingMembers {
	ctx := context.Background()
	tb := setupAuth(t)
	r := &racingMembers{t: t, tb: tb, gates: newGates(), outcomes: map[string]worker.Outcome{}, clients: map[string]convov1connect.ConversationServiceClient{}}
	for _, u := range []string{"alice", "pat", "vic"} {
		r.clients[u] = tb.clientAs(tokenFor(t, u))
	}
	alice := r.clients["alice"]
	r.conv = tb.send(t, alice, "", "the first message").ConversationId
	for u, role := range map[string]string{"pat": "participant", "vic": "viewer"} {
		if _, err := addMember(alice, r.conv, u, role); err != nil {
			t.Fatal(err)
		}
	}
	// The conversation's policy: pat's sends name none and take it.
	if _, err := alice.SetSendPolicy(ctx, connect.NewRequest(&convov1.SetSendPolicyRequest{ConversationId: r.conv, SendPolicy: policy})); err != nil {
		t.Fatal(err)
	}
	r.subscribe("")

	models := worker.NewModels("test")
	models.Register("test", gatedModel(r.gates, 5*time.Millisecond), "gated")
	pool, err := worker.Start(ctx, tb.pool, worker.Config{
		Workers: 2, Models: models, PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Listener: tb.workerListener(t),
		OnPromptDone: func(res worker.Result) {
			r.mu.Lock()
			r.outcomes[res.PromptID.String()] = res.Outcome
			r.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.gates.openAll()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pool.Stop(ctx); err != nil {
			t.Errorf("stop the workers: %v", err)
		}
	})
	return r
}

// subscribe opens a stream as alice, pat and vic, named with suffix.
func (r *racingMembers) subscribe(suffix string) {
	for _, u := range []string{"alice", "pat", "vic"} {
		s := subscribe(r.t, r.clients[u], &convov1.StreamConversationRequest{ConversationId: r.conv})
		r.subs = append(r.subs, namedSub{name: u + suffix, user: u, sub: s})
	}
}

func (r *racingMembers) state() *convov1.GetConversationResponse {
	r.t.Helper()
	return wholeConversation(r.t, r.clients["alice"], &convov1.GetConversationRequest{ConversationId: r.conv})
}

// running waits for a reply that runs, has written text and was not let
// finish (its gate is closed), and returns it, the text of the user
// message it answers (its gate) and its text so far.
func (r *racingMembers) running() (reply *convov1.Message, gate, text string) {
	r.t.Helper()
	testwait.For(r.t, "a reply running with text", func() bool {
		st := r.state()
		for _, m := range st.Messages {
			if m.Role != "assistant" || m.Status != "processing" || textOf(m) == "" {
				continue
			}
			for _, u := range st.Messages {
				if u.Id == m.ParentId && !r.gates.isOpen(textOf(u)) {
					reply, gate, text = m, textOf(u), textOf(m)
					return true
				}
			}
		}
		return false
	})
	return reply, gate, text
}

// idle waits until no reply of the conversation is queued or running.
func (r *racingMembers) idle() *convov1.GetConversationResponse {
	r.t.Helper()
	var st *convov1.GetConversationResponse
	testwait.For(r.t, "every reply to end", func() bool {
		st = r.state()
		for _, m := range st.Messages {
			if m.Role == "assistant" && (m.Status == "pending" || m.Status == "processing") {
				return false
			}
		}
		return st.Conversation.GetActivePromptId() == ""
	})
	return st
}

// race sends alice's and pat's messages into the conversation at once.
func (r *racingMembers) race(label string) [2]raced {
	out := [2]raced{{who: "alice"}, {who: "pat"}}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range out {
		out[i].text = fmt.Sprintf("%s from %s", label, out[i].who)
		client := r.clients[out[i].who]
		wg.Go(func() {
			<-start
			res, err := client.SendMessage(context.Background(), connect.NewRequest(&convov1.SendMessageRequest{
				ConversationId: r.conv, Text: out[i].text,
			}))
			out[i].err = err
			if err == nil {
				out[i].res = res.Msg
			}
		})
	}
	close(start)
	wg.Wait()
	return out
}

// rows counts the conversation's messages and prompts, and its blocks
// holding one of texts: what a refused send must not change.
func (r *racingMembers) rows(texts ...string) string {
	r.t.Helper()
	var messages, prompts, holding int
	err := r.tb.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM convo.messages WHERE conversation_id = $1),
		(SELECT count(*) FROM convo.prompts WHERE conversation_id = $1),
		(SELECT count(*) FROM convo.blocks WHERE conversation_id = $1 AND content = ANY($2::text[]))`,
		r.conv, texts).Scan(&messages, &prompts, &holding)
	if err != nil {
		r.t.Fatal(err)
	}
	return fmt.Sprintf("%d messages, %d prompts, %d blocks holding the refused texts", messages, prompts, holding)
}

// settle opens every gate, waits for the conversation to be idle, and
// checks every subscriber: at no point of its stream did two replies run
// at once or one start twice, and its fold equals GetConversation as its
// user reads it. It returns the final state (alice's) and the prompts in
// the order the first subscriber (alice's, from the start) saw them
// start.
func (r *racingMembers) settle() (*convov1.GetConversationResponse, []string) {
	t := r.t
	t.Helper()
	r.gates.openAll()
	r.idle()
	// A last event, so that every fold has applied everything before it.
	if _, err := r.clients["alice"].RenameConversation(context.Background(), connect.NewRequest(&convov1.RenameConversationRequest{
		ConversationId: r.conv, Title: "settled",
	})); err != nil {
		t.Fatal(err)
	}
	final := r.state()
	var started []string
	for i, s := range r.subs {
		want := wholeConversation(t, r.clients[s.user], &convov1.GetConversationRequest{ConversationId: r.conv})
		if want.Seq != final.Seq {
			t.Fatalf("%s's GetConversation is at seq %d, alice's at %d", s.user, want.Seq, final.Seq)
		}
		if st := s.sub.waitSeq(t, want.Seq, streamTimeout); !st.equal(want) {
			t.Errorf("%s folds to a different state than GetConversation at seq %d: %s", s.name, want.Seq, st.diff(want))
		}
		order := oneAtATime(t, s.name, s.sub)
		if i == 0 {
			started = order
		}
		if strings.HasSuffix(s.name, " late") && !replayed(s.sub) {
			t.Errorf("%s joined while a reply streamed text, and nothing was replayed to it", s.name)
		}
	}
	for _, m := range final.Messages {
		if m.Role == "assistant" && m.Status != "completed" && m.Status != "cancelled" {
			t.Errorf("reply %s ended %s (%s)", m.Id, m.Status, m.Error)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for prompt, o := range r.outcomes {
		if o == worker.OutcomeFailed {
			t.Errorf("a worker failed prompt %s", prompt)
		}
	}
	return final, started
}

// replayed reports whether sub received replayed events (the blocks in
// flight when it joined).
func replayed(sub *subscriber) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return slices.ContainsFunc(sub.received, func(m *convov1.StreamConversationResponse) bool { return m.GetEvent().GetReplay() })
}

// oneAtATime folds again what sub received, checking after each message
// that at most one reply runs: at most one assistant message processing,
// no promptStarted before the prompt that runs ended, no prompt started
// twice. It returns the prompts in the order they started.
func oneAtATime(t *testing.T, name string, sub *subscriber) []string {
	t.Helper()
	sub.mu.Lock()
	received := slices.Clone(sub.received)
	sub.mu.Unlock()
	var f folded
	running, started := map[string]bool{}, map[string]bool{}
	var order []string
	for i, msg := range received {
		if err := f.apply(msg); err != nil {
			t.Errorf("%s: message %d: %v", name, i, err)
			return order
		}
		switch k := msg.GetEvent().GetKind().(type) {
		case *convov1.Event_PromptStarted:
			id := k.PromptStarted.GetPrompt().GetId()
			if started[id] {
				t.Errorf("%s: prompt %s started twice (seq %d)", name, id, f.seq)
			}
			if len(running) > 0 {
				t.Errorf("%s: prompt %s started at seq %d while %v ran", name, id, f.seq, running)
			}
			started[id], running[id] = true, true
			order = append(order, id)
		case *convov1.Event_PromptCompleted:
			delete(running, k.PromptCompleted.GetPrompt().GetId())
		case *convov1.Event_PromptFailed:
			delete(running, k.PromptFailed.GetPrompt().GetId())
		case *convov1.Event_PromptCancelled:
			delete(running, k.PromptCancelled.GetPrompt().GetId())
		}
		n := 0
		for _, m := range f.messages {
			if m.Role == "assistant" && m.Status == "processing" {
				n++
			}
		}
		if n > 1 {
			t.Errorf("%s: at seq %d, %d replies are processing", name, f.seq, n)
		}
	}
	return order
}

// exchangeAt returns messages i and i+1, failing unless they are a user
// message (no longer queued) and its reply, hanging below the message
// before them.
func exchangeAt(t *testing.T, messages []*convov1.Message, i int) (user, reply *convov1.Message) {
	t.Helper()
	u, a := messages[i], messages[i+1]
	if u.Role != "user" || a.Role != "assistant" || a.ParentId != u.Id || u.Queued || a.Queued {
		t.Fatalf("messages %d and %d: %s %s (queued %t) then %s %s below %s (queued %t), want a user message and its reply",
			i, i+1, u.Role, u.Id, u.Queued, a.Role, a.Id, a.ParentId, a.Queued)
	}
	if i > 0 && u.ParentId != messages[i-1].Id {
		t.Fatalf("message %d hangs below %s, not the reply before it", i, u.ParentId)
	}
	return u, a
}

// pairs checks the conversation's shape: user message, its one reply,
// user message, its one reply, … each hanging below the one before, n
// pairs; and that every kept send's messages are in it. It returns the
// index of each message by id.
func pairs(t *testing.T, st *convov1.GetConversationResponse, n int, kept []raced) map[string]int {
	t.Helper()
	if len(st.Messages) != 2*n {
		t.Fatalf("%d messages, want %d (%d sends kept, each with one reply)", len(st.Messages), 2*n, n)
	}
	at := map[string]int{}
	for i := 0; i < len(st.Messages); i += 2 {
		u, a := exchangeAt(t, st.Messages, i)
		at[u.Id], at[a.Id], at[a.PromptId] = i, i+1, i+1
	}
	for _, k := range kept {
		if _, ok := at[k.res.UserMessageId]; !ok {
			t.Errorf("%s's send %q is not in the conversation", k.who, k.text)
		}
		if i, ok := at[k.res.PromptId]; !ok || st.Messages[i].Id != k.res.AssistantMessageId {
			t.Errorf("%s's send %q: its reply %s is not in the conversation", k.who, k.text, k.res.AssistantMessageId)
		}
	}
	return at
}

// TestMembersRacingSendsUnderEachPolicy: round after round, while a reply
// runs (streaming text, from workers), the owner (alice) and a
// participant (pat) send at once into their conversation, under each send
// policy (the conversation's, which pat's sends take). Subscribers as
// alice, pat and vic (a viewer) follow it from the start, and three more
// join half-way while a reply streams; at no point of any stream do two
// replies run at once, and at the end every fold equals GetConversation
// as its user reads it.
//
//   - Enqueue: both sends are kept, queued; every reply is answered, one
//     at a time, in send order, each once.
//   - Interrupt: both sends are answered at once, not queued; the reply
//     that ran is cancelled and keeps its text; of the two new replies the
//     later send's is answered (it is the next round's running one, the
//     last round's completes), the earlier's cancelled; none lost or
//     started twice.
//   - Reject: the sends made while a reply runs are both refused
//     (failed_precondition naming the running prompt) and write nothing;
//     of two sends made while none runs, exactly one is kept and the
//     other, now behind its reply, refused, writing nothing.
func TestMembersRacingSendsUnderEachPolicy(t *testing.T) {
	t.Parallel()
	const rounds, late = 10, 5
	t.Run("Enqueue", func(t *testing.T) {
		t.Parallel()
		r := raceMembers(t, convov1.SendPolicy_SEND_POLICY_ENQUEUE)
		var kept []raced
		for round := range rounds {
			_, gate, _ := r.running()
			if round == late {
				r.subscribe(" late")
			}
			for _, o := range r.race(fmt.Sprintf("round %d", round)) {
				if o.err != nil || !o.res.Queued {
					t.Fatalf("round %d, %s's send: %v, %v; want it queued behind the running reply", round, o.who, o.res, o.err)
				}
				kept = append(kept, o)
			}
			r.gates.open(gate)
		}
		final, started := r.settle()
		at := pairs(t, final, 1+2*rounds, kept)
		var order []string
		for _, m := range final.Messages {
			if m.Role == "assistant" {
				order = append(order, m.PromptId)
				if m.Status != "completed" || !gatedText(textOf(m), true) {
					t.Errorf("reply %d: %s %q, want it completed with the whole answer", at[m.Id], m.Status, textOf(m))
				}
			}
		}
		if !slices.Equal(started, order) {
			i := 0
			for i < min(len(started), len(order)) && started[i] == order[i] {
				i++
			}
			t.Errorf("%d replies started, %d in the conversation; the %dth to start was not the %dth sent: replies not answered in send order",
				len(started), len(order), i+1, i+1)
		}
		for _, s := range r.subs[3:] {
			if got := oneAtATime(t, s.name, s.sub); len(got) == 0 || !slices.Equal(got, order[len(order)-len(got):]) {
				t.Errorf("%s saw the replies start in the order %v, want the last of %v", s.name, got, order)
			}
		}
	})
	t.Run("Interrupt", func(t *testing.T) {
		t.Parallel()
		r := raceMembers(t, convov1.SendPolicy_SEND_POLICY_INTERRUPT)
		type roundOf struct {
			interrupted *convov1.Message // the reply that ran
			text        string           // its text when the sends were made
			sends       [2]raced
		}
		var rs []roundOf
		var kept []raced
		for round := range rounds {
			reply, gate, text := r.running()
			if round > 0 {
				prev := rs[round-1].sends
				if reply.PromptId != prev[0].res.PromptId && reply.PromptId != prev[1].res.PromptId {
					t.Fatalf("round %d: reply %s runs, not one of round %d's sends'", round, reply.Id, round-1)
				}
			}
			if round == late {
				r.subscribe(" late")
			}
			out := r.race(fmt.Sprintf("round %d", round))
			for _, o := range out {
				if o.err != nil || o.res.Queued {
					t.Fatalf("round %d, %s's send: %v, %v; want it answered at once", round, o.who, o.res, o.err)
				}
			}
			kept = append(kept, out[:]...)
			r.gates.open(gate)
			rs = append(rs, roundOf{reply, text, out})
		}
		final, _ := r.settle()
		at := pairs(t, final, 1+2*rounds, kept)
		for round, rd := range rs {
			m := final.Messages[at[rd.interrupted.Id]]
			if got := textOf(m); m.Status != "cancelled" || !strings.HasPrefix(got, rd.text) || !gatedText(got, false) {
				t.Errorf("round %d: the reply that ran ended %s with %q; want it cancelled, keeping its text %q", round, m.Status, got, rd.text)
			}
			earlier, later := rd.sends[0].res, rd.sends[1].res
			if at[earlier.UserMessageId] > at[later.UserMessageId] {
				earlier, later = later, earlier
			}
			if m := final.Messages[at[earlier.PromptId]]; m.Status != "cancelled" {
				t.Errorf("round %d: the earlier send's reply is %s, want it cancelled by the later send", round, m.Status)
			}
			survivor := final.Messages[at[later.PromptId]]
			if round < rounds-1 {
				if rs[round+1].interrupted.PromptId != later.PromptId {
					t.Errorf("round %d: the next round's running reply was not the later send's", round)
				}
			} else if survivor.Status != "completed" || !gatedText(textOf(survivor), true) {
				t.Errorf("the last round's later send's reply: %s %q, want it completed", survivor.Status, textOf(survivor))
			}
		}
		completed := 0
		for _, m := range final.Messages {
			if m.Role == "assistant" && m.Status == "completed" {
				completed++
			}
		}
		if completed != 1 {
			t.Errorf("%d replies completed, want 1 (every other one interrupted)", completed)
		}
	})
	t.Run("Reject", func(t *testing.T) {
		t.Parallel()
		r := raceMembers(t, convov1.SendPolicy_SEND_POLICY_REJECT)
		var kept []raced
		reply, gate, _ := r.running()
		for round := range rounds {
			if round == late {
				r.subscribe(" late")
			}
			// A reply runs: both sends refused, nothing written.
			label := fmt.Sprintf("round %d while a reply runs", round)
			texts := []string{label + " from alice", label + " from pat"}
			before := r.rows(texts...)
			for _, o := range r.race(label) {
				ce := requireCode(t, o.err, connect.CodeFailedPrecondition)
				if !strings.Contains(ce.Message(), "a reply is running") || !strings.Contains(ce.Message(), reply.PromptId) {
					t.Errorf("round %d, %s's send: %q; want it to say a reply is running, naming prompt %s", round, o.who, ce.Message(), reply.PromptId)
				}
			}
			if after := r.rows(texts...); after != before {
				t.Errorf("round %d: two refused sends changed the conversation: %s, then %s", round, before, after)
			}
			r.gates.open(gate)
			r.idle()

			// None runs: the first send kept, the second refused behind
			// its reply.
			label = fmt.Sprintf("round %d while none runs", round)
			texts = []string{label + " from alice", label + " from pat"}
			var m0, p0 int
			if err := r.tb.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM convo.messages WHERE conversation_id = $1),
				(SELECT count(*) FROM convo.prompts WHERE conversation_id = $1)`, r.conv).Scan(&m0, &p0); err != nil {
				t.Fatal(err)
			}
			out := r.race(label)
			var sent, refused *raced
			for i := range out {
				if out[i].err == nil {
					sent = &out[i]
				} else {
					refused = &out[i]
				}
			}
			if sent == nil || refused == nil {
				t.Fatalf("round %d: sends made while no reply ran: %v and %v; want one kept, the other refused", round, out[0].err, out[1].err)
			}
			if sent.res.Queued {
				t.Errorf("round %d: %s's send was queued, with no reply before it", round, sent.who)
			}
			ce := requireCode(t, refused.err, connect.CodeFailedPrecondition)
			if !strings.Contains(ce.Message(), "a reply is running") || !strings.Contains(ce.Message(), sent.res.PromptId) {
				t.Errorf("round %d, %s's send: %q; want it refused naming %s's prompt %s", round, refused.who, ce.Message(), sent.who, sent.res.PromptId)
			}
			want := fmt.Sprintf("%d messages, %d prompts, 1 blocks holding the refused texts", m0+2, p0+1)
			if got := r.rows(texts...); got != want {
				t.Errorf("round %d: after one send kept and one refused: %s, want %s (the kept one's text only)", round, got, want)
			}
			kept = append(kept, *sent)
			reply, gate, _ = r.running()
			if reply.PromptId != sent.res.PromptId {
				t.Fatalf("round %d: reply %s runs, not the kept send's %s", round, reply.PromptId, sent.res.PromptId)
			}
		}
		final, _ := r.settle()
		pairs(t, final, 1+rounds, kept)
		for i, m := range final.Messages {
			if m.Role == "assistant" && (m.Status != "completed" || !gatedText(textOf(m), true)) {
				t.Errorf("reply %d: %s %q, want it completed with the whole answer", i, m.Status, textOf(m))
			}
		}
	})
}
