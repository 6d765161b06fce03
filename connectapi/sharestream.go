package connectapi

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/stream"
)

// shareStreamEvery is the least time between two states a share's stream
// sends: each is the whole shared path read again, so a reply streaming
// many deltas a second costs one read per interval, not one per delta.
const shareStreamEvery = 200 * time.Millisecond

// StreamSharedConversation follows what a share shows, with its token
// alone (anonymousProcedures). It follows the conversation through the
// hub as its owner's reads would, opened for the share (stream.OpenParams
// .ShareID), so that the share's revocation ends it on every server; its
// expiry ends it by its own deadline. Every state it sends is
// GetSharedConversation's, read anew, so what a share hides is hidden the
// same way here.
func (s *service) StreamSharedConversation(ctx context.Context, req *connect.Request[convov1.StreamSharedConversationRequest], out *connect.ServerStream[convov1.StreamSharedConversationResponse]) error {
	if s.hub == nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("this server does not stream"))
	}
	token, err := shareToken("token", req.Msg.GetToken())
	if err != nil {
		return err
	}
	share, err := s.store.ShareByToken(ctx, token)
	if err != nil {
		return err
	}
	owner, err := s.store.ConversationOwner(ctx, share.ConversationID)
	if err != nil {
		return err
	}
	if share.ExpiresAt != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, *share.ExpiresAt)
		defer cancel()
	}
	state, err := s.sharedState(ctx, token)
	if err != nil {
		return shareStreamEnd(ctx, err)
	}
	// Opened after the read, resuming after its seq: every event since
	// comes through (a resume too far behind starts from a snapshot,
	// which is only a sign that something changed).
	seq := state.GetSeq()
	sub, err := s.hub.Open(ctx, stream.OpenParams{
		OwnerID: owner, ConversationID: share.ConversationID, AfterSeq: &seq, Branches: true, ShareID: share.ID,
	})
	if err != nil {
		return shareStreamEnd(ctx, err)
	}
	defer sub.Close()
	_, changed := sub.Snapshot()
	sub.ReleaseSnapshot()
	if err := out.Send(&convov1.StreamSharedConversationResponse{State: state}); err != nil {
		return err
	}
	live := share.Mode == conversation.ShareLive
	last := time.Now()
	for {
		if !changed {
			item, err := sub.Next(ctx)
			if err != nil {
				return shareStreamEnd(ctx, err)
			}
			changed = live && !item.Ephemeral
		}
		if !changed {
			continue
		}
		// Wait out the interval, then take every event that came
		// meanwhile: one read covers them all.
		if wait := time.Until(last.Add(shareStreamEvery)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return shareStreamEnd(ctx, ctx.Err())
			case <-t.C:
			}
		}
		for {
			_, ready, err := sub.TryNext(ctx)
			if err != nil {
				return shareStreamEnd(ctx, err)
			}
			if !ready {
				break
			}
		}
		state, err := s.sharedState(ctx, token)
		if err != nil {
			return shareStreamEnd(ctx, err)
		}
		if err := out.Send(&convov1.StreamSharedConversationResponse{State: state}); err != nil {
			return err
		}
		last, changed = time.Now(), false
	}
}

// sharedState is what the share token opens shows now.
func (s *service) sharedState(ctx context.Context, token string) (*convov1.GetSharedConversationResponse, error) {
	raw, err := s.store.SharedConversation(ctx, token)
	if err != nil {
		return nil, err
	}
	out := &convov1.GetSharedConversationResponse{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, out); err != nil {
		return nil, conversation.Errorf(conversation.Internal, "decode a shared conversation: %v", err)
	}
	return out, nil
}

// shareStreamEnd is how a share's stream ends on err: a share that
// expired (the stream's deadline) ends as a revoked one does, NotFound
// "share does not exist".
func shareStreamEnd(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return stream.ErrShareEnded
	}
	return err
}
