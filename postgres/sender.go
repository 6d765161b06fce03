package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// The sender's bounds.
const (
	// DefaultMaxPendingSends is the sends that may wait to be written
	// before more are refused (SetMaxPendingSends): about two seconds of
	// groups on a small machine (docs/performance.md).
	DefaultMaxPendingSends = 2000
	// maxSendGroup bounds the sends one transaction writes: a group's
	// locks are held until it commits, and its latency is every send's.
	// Each send is a subtransaction: past 64 in one transaction,
	// PostgreSQL's snapshots of every session get slower (the
	// subtransaction cache overflows).
	maxSendGroup = 50
	// minSendGroup is the smallest group a lane takes when more wait:
	// below it the commit (one fsync, one notification) is most of a
	// group's time.
	minSendGroup = 4
	// sendGroupTarget is how long a group's transaction should take. A
	// group is answered only when all its sends are written, so a lane
	// takes what it can write in about this time, not all that waits:
	// the sends of a burst commit (and their replies start) a few at a
	// time, the first within a group's time, instead of every one of a
	// group of 50 waiting for the 49 others.
	sendGroupTarget = 25 * time.Millisecond
	// firstSendGroup is a group's cap until a group's time was measured.
	firstSendGroup = 8
	// sendLanes bounds the groups written at once: one transaction runs
	// on one core of the database, and the sends of a burst use them all.
	sendLanes = 4
	// sendRetries is how many times a send whose transaction PostgreSQL
	// aborted for a deadlock or a serialization failure (SQLSTATE class
	// 40: nothing of it was written) is written again before its caller
	// gets the error. Such an abort is the database choosing a victim
	// among transactions that waited for each other (an upgrade's
	// migrations and a serving send: docs/deploy.md, "Upgrades"), not
	// anything wrong with the send.
	sendRetries = 3
	// sendGroupTimeout bounds one group's transaction; its callers wait
	// no longer than their own contexts allow.
	sendGroupTimeout = time.Minute
	// overloadRetryAfter is the Retry-After of a send refused because too
	// many wait: a group commits in well under a second.
	overloadRetryAfter = time.Second
)

// sender writes concurrent SendMessage calls in shared transactions
// (group commit): a send that arrives while no group is being written
// goes at once, alone; the sends that arrive while one is written wait
// and go together in the next, each in its own subtransaction
// (convo.send_messages), so a refused send writes nothing and fails no
// other. A group is as many as commit in about sendGroupTarget (by the
// time groups took lately; minSendGroup to maxSendGroup), so that a
// burst's sends are answered a few at a time as they commit. Up to sendLanes groups are written at once, each
// one commit (one fsync) and one notification of the workers for the
// sends it carries, instead of one per send.
type sender struct {
	q *dbq.Queries

	mu    sync.Mutex
	queue []*pendingSend
	// lanes is the goroutines writing groups (run), at most maxLanes.
	lanes, maxLanes int
	// maxPending bounds len(queue); 0: no bound.
	maxPending int

	// onQueued, when set, is called after a group that queued prompts
	// committed (OnPromptsQueued).
	onQueued atomic.Pointer[func()]

	// perSend is the recent time of a group divided by its sends, in
	// nanoseconds (an average weighing the last group a quarter); 0:
	// none measured yet.
	perSend atomic.Int64

	groups, sent, overloaded atomic.Int64
}

// pendingSend is one SendMessage waiting in the sender's queue.
type pendingSend struct {
	p       conversation.SendMessageParams
	configs string
	// trace is the W3C trace context of the send's request as JSON
	// (traceContext), "" when it has none.
	trace string
	// done receives the send's answer, once.
	done chan sendAnswer
	// taken is set, under the sender's mu, when a group takes the send;
	// until then a caller that gives up removes it.
	taken bool
	// aborted counts the transactions of this send that PostgreSQL
	// aborted for a deadlock or a serialization failure (sendRetries).
	aborted int
}

type sendAnswer struct {
	res conversation.SendMessageResult
	err error
}

func newSender(q *dbq.Queries) *sender {
	return &sender{q: q, maxPending: DefaultMaxPendingSends, maxLanes: sendLanes}
}

// send queues p and waits for its answer, or for ctx to end. It refuses
// at once, writing nothing, when maxPending sends already wait. A caller
// whose ctx ends before its group starts is dropped from the queue and
// nothing of its send is written; once its group started, the send's
// fate is the group's, whatever the caller does.
func (s *sender) send(ctx context.Context, p conversation.SendMessageParams, configs string) (conversation.SendMessageResult, error) {
	if err := ctx.Err(); err != nil {
		return conversation.SendMessageResult{}, fmt.Errorf("send message: %w", err)
	}
	req := &pendingSend{p: p, configs: configs, trace: traceContext(ctx), done: make(chan sendAnswer, 1)}
	s.mu.Lock()
	if s.maxPending > 0 && len(s.queue) >= s.maxPending {
		n := len(s.queue)
		s.mu.Unlock()
		s.overloaded.Add(1)
		e := conversation.Errorf(conversation.ResourceExhausted,
			"send message: the server is overloaded: %d messages are waiting to be written, its maximum (max pending sends); nothing was sent: retry after the Retry-After", n)
		e.RetryAfter, e.Overloaded = overloadRetryAfter, true
		return conversation.SendMessageResult{}, e
	}
	s.queue = append(s.queue, req)
	if s.lanes < s.maxLanes {
		s.lanes++
		go s.run()
	}
	s.mu.Unlock()
	select {
	case a := <-req.done:
		return a.res, a.err
	case <-ctx.Done():
		s.mu.Lock()
		if !req.taken {
			if i := slices.Index(s.queue, req); i >= 0 {
				s.queue = slices.Delete(s.queue, i, i+1)
			}
		}
		s.mu.Unlock()
		return conversation.SendMessageResult{}, fmt.Errorf("send message: %w", ctx.Err())
	}
}

// run writes groups until the queue is empty.
func (s *sender) run() {
	for {
		s.mu.Lock()
		n := min(len(s.queue), s.groupCap(len(s.queue)))
		if n == 0 {
			s.lanes--
			if s.lanes == 0 {
				s.queue = nil // let the backing array go
			}
			s.mu.Unlock()
			return
		}
		group := slices.Clone(s.queue[:n])
		for _, r := range group {
			r.taken = true
		}
		s.queue = s.queue[n:]
		s.mu.Unlock()
		s.write(group)
	}
}

// groupCap is how many sends the next group takes at most, with queued
// sends waiting (s.mu held).
func (s *sender) groupCap(queued int) int {
	return groupCapFor(time.Duration(s.perSend.Load()), queued, s.maxLanes)
}

// groupCapFor is the group cap for a time per send (0: not measured),
// with queued sends waiting for lanes: what commits in about
// sendGroupTarget, or, for a queue too long for the lanes to write in a
// few rounds of such groups, a share of it (up to maxSendGroup). A send
// deep in a long queue waits for the queue ahead of it whatever the
// groups; there the fewer commits of larger groups write it sooner.
func groupCapFor(perSend time.Duration, queued, lanes int) int {
	n := firstSendGroup
	if perSend > 0 {
		n = int(max(sendGroupTarget/perSend, minSendGroup))
	}
	n = max(n, queued/(4*max(lanes, 1)))
	return min(n, maxSendGroup)
}

// measured folds a group of n sends that took took into perSend.
func (s *sender) measured(n int, took time.Duration) {
	per := int64(took) / int64(n)
	for {
		old := s.perSend.Load()
		next := per
		if old > 0 {
			next = old + (per-old)/4
		}
		if s.perSend.CompareAndSwap(old, next) {
			return
		}
	}
}

// write writes group in one transaction and answers each of its sends.
func (s *sender) write(group []*pendingSend) {
	// One order of locks for every group: owners (the quota's advisory
	// lock), then their conversations, so two groups never wait for each
	// other in a cycle.
	slices.SortStableFunc(group, func(a, b *pendingSend) int {
		if c := strings.Compare(a.p.OwnerID, b.p.OwnerID); c != 0 {
			return c
		}
		return bytes.Compare(a.p.ConversationID[:], b.p.ConversationID[:])
	})
	arg := dbq.MessageSendManyParams{
		OwnerIds: make([]string, len(group)), ConversationIds: make([]uuid.UUID, len(group)),
		Texts: make([]string, len(group)), ModelConfigs: make([]string, len(group)),
		ParentMessageIds: make([]uuid.UUID, len(group)), FileIds: make([]string, len(group)),
	}
	for i, r := range group {
		arg.OwnerIds[i], arg.ConversationIds[i], arg.Texts[i] = r.p.OwnerID, r.p.ConversationID, r.p.Text
		arg.ModelConfigs[i], arg.ParentMessageIds[i], arg.FileIds[i] = r.configs, r.p.ParentMessageID, uuidArray(r.p.FileIDs)
		if r.trace != "" {
			// Without telemetry the array stays NULL: nothing to store.
			if arg.TraceContexts == nil {
				arg.TraceContexts = make([]string, len(group))
			}
			arg.TraceContexts[i] = r.trace
		}
		if r.p.Policy != conversation.SendPolicyDefault {
			// Without a policy named the array stays NULL: every item
			// takes its conversation's.
			if arg.Policies == nil {
				arg.Policies = make([]string, len(group))
			}
			arg.Policies[i] = string(r.p.Policy)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sendGroupTimeout)
	defer cancel()
	s.groups.Add(1)
	began := time.Now()
	rows, err := s.q.MessageSendMany(ctx, arg)
	if err == nil {
		s.measured(len(group), time.Since(began))
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if len(group) > 1 && errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
			// A value PostgreSQL refused before the function ran (text
			// that is not UTF-8): nothing was written; each send alone
			// finds whose it was.
			for _, r := range group {
				s.write([]*pendingSend{r})
			}
			return
		}
		aborted := errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "40")
		err = translate(err, "send message")
		var again []*pendingSend
		for _, r := range group {
			if aborted && r.aborted < sendRetries {
				// The whole transaction was rolled back: nothing was
				// written. The send goes again, alone.
				r.aborted++
				again = append(again, r)
				continue
			}
			r.done <- sendAnswer{err: err}
		}
		if len(again) > 0 {
			// A pause that lets the transaction it waited for end.
			time.Sleep(20 * time.Millisecond)
		}
		for _, r := range again {
			s.write([]*pendingSend{r})
		}
		return
	}
	var again []*pendingSend
	answers := make([]sendAnswer, len(group))
	answered := make([]bool, len(group))
	sent := 0
	for _, row := range rows {
		i := int(row.Ord) - 1
		if i < 0 || i >= len(group) || answered[i] {
			continue
		}
		answered[i] = true
		if row.ErrorCode == "" {
			sent++
			answers[i].res = conversation.SendMessageResult{
				ConversationID: row.ConversationID, UserMessageID: row.UserMessageID,
				AssistantMessageIDs: row.AssistantMessageIds, PromptIDs: row.PromptIds,
				ComparisonID: uuid.NullUUID{UUID: row.ComparisonID, Valid: row.ComparisonID != uuid.Nil},
				Queued:       row.Queued,
			}
			continue
		}
		if strings.HasPrefix(row.ErrorCode, "40") && (len(group) > 1 || group[i].aborted < sendRetries) {
			// A deadlock or serialization failure of this send's
			// subtransaction (with a writer outside the group): alone it
			// waits its turn, a few times at most.
			if len(group) == 1 {
				group[i].aborted++
			}
			again = append(again, group[i])
			answered[i] = false
			continue
		}
		answers[i].err = translate(&pgconn.PgError{Code: row.ErrorCode, Message: row.ErrorMessage, Detail: row.ErrorDetail}, "send message")
	}
	if sent > 0 {
		s.sent.Add(int64(sent))
		if wake := s.onQueued.Load(); wake != nil {
			(*wake)()
		}
	}
	for i, r := range group {
		if slices.Contains(again, r) {
			continue
		}
		if !answered[i] {
			answers[i].err = fmt.Errorf("send message: convo.send_messages returned no row for item %d of %d", i+1, len(group))
		}
		r.done <- answers[i]
	}
	for _, r := range again {
		s.write([]*pendingSend{r})
	}
}

// uuidArray is ids as a PostgreSQL array literal ("{…,…}").
func uuidArray(ids []uuid.UUID) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id.String())
	}
	b.WriteByte('}')
	return b.String()
}
