package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// StateRequest names one snapshot of a group (RecentStates): the
// conversation, its owner, and the bytes its messages may add up to, as
// RecentState's arguments.
type StateRequest struct {
	OwnerID        string
	ConversationID uuid.UUID
	MaxBytes       int
}

// StateResult answers one StateRequest: its state, or its own error.
type StateResult struct {
	State conversation.State
	Err   error
}

// RecentStates reads many snapshots at once, each exactly as RecentState
// reads it (the latest messages that fit in its MaxBytes, its open input
// requests within what they leave), all in one repeatable-read
// transaction of five statements whatever their number: every state of
// the group is taken at the same moment, and each one's rows agree with
// its Seq. A conversation named by several requests is read once.
//
// It returns one result per request, in order. A request's own failure
// stays in its result: NotFound for an unknown conversation or another
// owner's, an error for a MaxBytes that is not positive. The error
// returned (a database failure) is every request's.
func (s *Store) RecentStates(ctx context.Context, reqs []StateRequest) ([]StateResult, error) {
	results := make([]StateResult, len(reqs))
	// Each valid request, by its place in the query's arrays (nth - 1).
	var (
		at     []int
		ids    []uuid.UUID
		owners []string
		maxes  []int64
	)
	for i, r := range reqs {
		if r.MaxBytes <= 0 {
			results[i].Err = fmt.Errorf("postgres: RecentStates: maxBytes must be positive, got %d", r.MaxBytes)
			continue
		}
		at = append(at, i)
		ids, owners, maxes = append(ids, r.ConversationID), append(owners, r.OwnerID), append(maxes, int64(r.MaxBytes))
	}
	found := make([]bool, len(at))
	if len(at) > 0 {
		err := s.readSnapshot(ctx, func(q *dbq.Queries) error {
			return readStates(ctx, q, dbq.SnapshotConversationsParams{Ids: ids, UserIds: owners, MaxBytes: maxes},
				func(nth int, st conversation.State) { found[nth] = true; results[at[nth]].State = st },
				func(nth int, in conversation.InputRequest) {
					st := &results[at[nth]].State
					st.PendingInputs = append(st.PendingInputs, in)
				})
		})
		if err != nil {
			return nil, translate(err, "read the snapshots of conversations")
		}
	}
	for nth, ok := range found {
		if !ok {
			results[at[nth]].Err = conversation.Errorf(conversation.NotFound, "read conversation %s: not found", ids[nth])
		}
	}
	return results, nil
}

// readStates runs the group's reads in q's transaction: the conversations
// and where each one's snapshot begins, then the messages, blocks and tool
// calls of every conversation named from the earliest such place on, once,
// then the open input requests of those with an unfinished prompt. It
// hands each found request's state to state, then its input requests to
// input, both by the request's place in p's arrays.
func readStates(ctx context.Context, q *dbq.Queries, p dbq.SnapshotConversationsParams,
	state func(nth int, st conversation.State), input func(nth int, in conversation.InputRequest)) error {
	convs, err := q.SnapshotConversations(ctx, p)
	if err != nil || len(convs) == 0 {
		return err
	}
	from := make(map[uuid.UUID]int64, len(convs))
	named := make(map[uuid.UUID]int, len(convs))
	for _, c := range convs {
		id := c.ConvoConversation.ID
		if f, ok := from[id]; !ok || c.FromPosition < f {
			from[id] = c.FromPosition
		}
		named[id]++
	}
	span := dbq.SnapshotMessagesParams{ConversationIds: make([]uuid.UUID, 0, len(from)), FromPositions: make([]int64, 0, len(from))}
	for id, f := range from {
		span.ConversationIds = append(span.ConversationIds, id)
		span.FromPositions = append(span.FromPositions, f)
	}
	messages, err := q.SnapshotMessages(ctx, span)
	if err != nil {
		return err
	}
	blocks, err := q.SnapshotBlocks(ctx, dbq.SnapshotBlocksParams(span))
	if err != nil {
		return err
	}
	calls, err := q.SnapshotToolCalls(ctx, dbq.SnapshotToolCallsParams(span))
	if err != nil {
		return err
	}
	blockRows := make([]dbq.BlockListByConversationRow, len(blocks))
	for i, b := range blocks {
		blockRows[i] = dbq.BlockListByConversationRow(b)
	}
	callRows := make([]dbq.ToolCallListByConversationRow, len(calls))
	for i, c := range calls {
		callRows[i] = dbq.ToolCallListByConversationRow(c)
	}
	parts := indexParts(len(messages), blockRows, callRows)
	// Messages come in position order per conversation.
	byConversation := make(map[uuid.UUID][]dbq.MessageListByConversationRow, len(from))
	for _, m := range messages {
		byConversation[m.ConversationID] = append(byConversation[m.ConversationID], dbq.MessageListByConversationRow(m))
	}
	var inputs dbq.SnapshotInputRequestsParams
	var inputAt []int
	for _, c := range convs {
		nth := int(c.Nth) - 1
		conv := c.ConvoConversation
		rows := byConversation[conv.ID]
		first := 0
		for first < len(rows) && rows[first].Position < c.FromPosition {
			first++
		}
		st := conversation.State{Conversation: conversationFromRow(conv), Seq: conv.LastSeq, Older: c.Older}
		st.Conversation.Role = conversation.MemberRole(c.Role)
		st.Messages = parts.assemble(rows[first:], named[conv.ID] > 1)
		state(nth, st)
		// As readState: only a conversation with an unfinished prompt
		// can have open input requests, within what the messages left
		// of the request's budget.
		if conv.ActivePromptID.Valid {
			inputs.ConversationIds = append(inputs.ConversationIds, conv.ID)
			inputs.MaxBytes = append(inputs.MaxBytes, max(p.MaxBytes[nth]-messagesBytes(st.Messages), 0))
			inputAt = append(inputAt, nth)
		}
	}
	if len(inputAt) == 0 {
		return nil
	}
	open, err := q.SnapshotInputRequests(ctx, inputs)
	if err != nil {
		return err
	}
	for _, r := range open {
		input(inputAt[r.Nth-1], inputRequestFromRow(dbq.InputRequestListOpenRow{
			ToolCallID: r.ToolCallID, ConversationID: r.ConversationID, PromptID: r.PromptID, Kind: r.Kind,
			Request: r.Request, Status: r.Status, Answer: r.Answer, AnsweredAt: r.AnsweredAt, ExpiresAt: r.ExpiresAt,
			ClaimedBy: r.ClaimedBy, ClaimExpiresAt: r.ClaimExpiresAt, CreatedAt: r.CreatedAt,
		}))
	}
	return nil
}
