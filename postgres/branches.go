package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/postgres/dbq"
)

// The versions of a conversation's turns (docs/branches.md): each call is
// one SQL function, which changes the active path and writes its
// branchSwitched event under the conversation's lock.

// RegenerateReply implements conversation.Store.
func (s *Store) RegenerateReply(ctx context.Context, p conversation.RegenerateParams) (conversation.RegenerateResult, error) {
	var row dbq.MessageRegenerateRow
	err := s.changePath(ctx, func(q *dbq.Queries) (err error) {
		row, err = q.MessageRegenerate(ctx, dbq.MessageRegenerateParams{
			OwnerID: p.OwnerID, ConversationID: p.ConversationID, MessageID: p.MessageID, ModelConfig: p.ModelConfig,
		})
		return err
	})
	if err != nil {
		return conversation.RegenerateResult{}, translate(err, "regenerate reply")
	}
	return conversation.RegenerateResult{MessageID: row.MessageID, PromptID: row.PromptID}, nil
}

// EditMessage implements conversation.Store.
func (s *Store) EditMessage(ctx context.Context, p conversation.EditParams) (conversation.EditResult, error) {
	var row dbq.MessageEditRow
	err := s.changePath(ctx, func(q *dbq.Queries) (err error) {
		row, err = q.MessageEdit(ctx, dbq.MessageEditParams{
			OwnerID: p.OwnerID, ConversationID: p.ConversationID, MessageID: p.MessageID, Text: p.Text,
			ModelConfig: p.ModelConfig, FileIds: nonNil(p.FileIDs),
		})
		return err
	})
	if err != nil {
		return conversation.EditResult{}, translate(err, "edit message "+p.MessageID.String())
	}
	return conversation.EditResult{
		UserMessageID: row.UserMessageID, AssistantMessageID: row.AssistantMessageID, PromptID: row.PromptID,
	}, nil
}

// SwitchBranch implements conversation.Store.
func (s *Store) SwitchBranch(ctx context.Context, ownerID string, conversationID, messageID uuid.UUID) (uuid.UUID, error) {
	var leaf uuid.UUID
	err := s.changePath(ctx, func(q *dbq.Queries) (err error) {
		leaf, err = q.BranchSwitch(ctx, dbq.BranchSwitchParams{
			OwnerID: ownerID, ConversationID: conversationID, MessageID: messageID,
		})
		return err
	})
	if err != nil {
		return uuid.Nil, translate(err, "switch branch to message "+messageID.String())
	}
	return leaf, nil
}

// SendAfter implements conversation.Store with convo.send_after: one
// statement, so the switch it may make is undone with any refusal.
func (s *Store) SendAfter(ctx context.Context, p conversation.SendAfterParams) (conversation.SendAfterResult, error) {
	var row dbq.BranchSendAfterRow
	err := s.changePath(ctx, func(q *dbq.Queries) (err error) {
		row, err = q.BranchSendAfter(ctx, dbq.BranchSendAfterParams{
			OwnerID: p.OwnerID, ConversationID: p.ConversationID, AfterMessageID: p.AfterMessageID, Text: p.Text,
			ModelConfig: p.ModelConfig, FileIds: nonNil(p.FileIDs),
		})
		return err
	})
	if err != nil {
		return conversation.SendAfterResult{}, translate(err, "send after message "+p.AfterMessageID.String())
	}
	// As SendMessage's groups: workers in this process claim the prompt
	// at once, not at the notification.
	if wake := s.sends.onQueued.Load(); wake != nil {
		(*wake)()
	}
	return conversation.SendAfterResult{UserMessageID: row.UserMessageID, PromptID: row.PromptID}, nil
}

// SwitchVersion implements conversation.Store.
func (s *Store) SwitchVersion(ctx context.Context, ownerID string, conversationID, messageID uuid.UUID, siblingIndex int) (uuid.UUID, error) {
	if siblingIndex < 0 || siblingIndex > math.MaxInt32 {
		return uuid.Nil, conversation.Errorf(conversation.Invalid, "siblingIndex: %d is out of range", siblingIndex)
	}
	var leaf uuid.UUID
	err := s.changePath(ctx, func(q *dbq.Queries) (err error) {
		leaf, err = q.BranchSwitchVersion(ctx, dbq.BranchSwitchVersionParams{
			OwnerID: ownerID, ConversationID: conversationID, MessageID: messageID, SiblingIndex: int32(siblingIndex),
		})
		return err
	})
	if err != nil {
		return uuid.Nil, translate(err, "switch to version "+strconv.Itoa(siblingIndex)+" of message "+messageID.String())
	}
	return leaf, nil
}

// SetSnapshotBytes bounds the messages a branchSwitched carries to
// maxBytes, sized as a snapshot's (RecentState), for every call of s that
// changes a conversation's path (edits, regenerations, switches, sends
// after a message, deletions): each runs in a transaction that first sets
// convo.snapshot_bytes, which convo._event_bytes reads, for that
// transaction only. Unlike the pool-wide SetSnapshotBytes, which sets it
// on the session, this holds through a transaction pooler (PgBouncer's
// pool_mode = transaction), where a session's settings leak to other
// clients and are missing from the next transaction. 0 (the default)
// leaves the session's bound: 256 KiB unless SetSnapshotBytes set one.
// Call it before s serves.
func (s *Store) SetSnapshotBytes(maxBytes int) { s.eventBytes = maxBytes }

// changePath runs fn, a call that may change a conversation's path and
// queue a reply, in a transaction that first sets the bound of
// SetSnapshotBytes and the trace context of ctx's span (so that the
// reply's prompt continues the request's trace, as a sent message's
// does); with neither to set, as one statement on the pool.
func (s *Store) changePath(ctx context.Context, fn func(q *dbq.Queries) error) error {
	trace := traceContext(ctx)
	if s.eventBytes == 0 && trace == "" {
		return fn(s.q)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if s.eventBytes != 0 {
			if err := q.BranchSetEventBytesLocal(ctx, strconv.Itoa(s.eventBytes)); err != nil {
				return fmt.Errorf("set convo.snapshot_bytes: %w", err)
			}
		}
		if trace != "" {
			if err := q.BranchSetTraceContextLocal(ctx, trace); err != nil {
				return fmt.Errorf("set convo.trace_context: %w", err)
			}
		}
		return fn(q)
	})
}

// SetSnapshotBytes makes the connections of cfg bound the messages a
// branchSwitched carries to maxBytes, sized as a snapshot's
// (RecentState): the session setting convo.snapshot_bytes, which
// convo._event_bytes reads. Give the Store's pool the bound its
// streams' snapshots have, so that an event is never larger than a
// snapshot; without it the bound is 256 KiB, the streams' default.
//
// The setting is made once a connection is open (AfterConnect, after
// any hook cfg had), not sent among the startup parameters: PgBouncer,
// the session pooler docs/deploy.md allows in front of convo, refuses a
// connection whose startup packet holds a parameter it does not know
// ("unsupported startup parameter: convo.snapshot_bytes"). It is session
// state: behind a transaction pooler use Store.SetSnapshotBytes instead.
func SetSnapshotBytes(cfg *pgxpool.Config, maxBytes int) {
	before := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if before != nil {
			if err := before(ctx, conn); err != nil {
				return err
			}
		}
		if err := dbq.New(conn).BranchSetEventBytes(ctx, strconv.Itoa(maxBytes)); err != nil {
			return fmt.Errorf("set convo.snapshot_bytes: %w", err)
		}
		return nil
	}
}
