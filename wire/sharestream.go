package wire

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/stream"
)

// ShareStreamEvery is the least time between two states a share's stream
// sends: each is the whole shared path read again, so a reply streaming
// many deltas a second costs one read per interval, not one per delta.
const ShareStreamEvery = 200 * time.Millisecond

// MaxShareToken bounds a share token as a request gives it: what
// conversation.NewShareToken makes is 43 characters.
const MaxShareToken = 128

// ShareReader is what a share link's reads need of the store.
type ShareReader interface {
	ShareByToken(ctx context.Context, token string) (conversation.Share, error)
	SharedConversation(ctx context.Context, token string) (json.RawMessage, error)
	ConversationOwner(ctx context.Context, conversationID uuid.UUID) (string, error)
}

// ShareToken checks a share token's form: anything from 1 to
// MaxShareToken bytes is looked up (and, not being a token, found
// nowhere). Errors are Invalid and name field.
func ShareToken(field, token string) (string, error) {
	switch {
	case token == "":
		return "", Invalid(field, "is required")
	case len(token) > MaxShareToken:
		return "", Invalid(field, "must be at most %d bytes, got %d", MaxShareToken, len(token))
	}
	return token, nil
}

// SharedState is what the share token opens shows now
// (conversation.Store.SharedConversation), the files its messages hold
// signed by urls (nil: none) as an owner's reads sign them. NotFound
// "share does not exist" for a token that opens nothing.
func SharedState(ctx context.Context, store ShareReader, urls FileURLs, token string) (*convov1.GetSharedConversationResponse, error) {
	raw, err := store.SharedConversation(ctx, token)
	if err != nil {
		return nil, err
	}
	out := &convov1.GetSharedConversationResponse{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, out); err != nil {
		return nil, conversation.Errorf(conversation.Internal, "decode a shared conversation: %v", err)
	}
	SignFiles(urls, out.GetMessages()...)
	return out, nil
}

// ShareStream follows what a share link shows, for every protocol that
// streams it (Connect's StreamSharedConversation, the SSE route): one
// loop, so that they send the same states at the same moments.
type ShareStream struct {
	Store ShareReader
	Hub   *Hub
	// URLs signs the files of every state (nil: none).
	URLs FileURLs
	// KeepAlive, when positive, is the silence after which Idle is
	// called (an SSE comment that keeps proxies from closing the
	// connection); Idle's error ends the stream.
	KeepAlive time.Duration
	Idle      func() error
}

// Follow sends the state token opens now, then, for a live share, the
// state again whenever the conversation changed, at most one every
// ShareStreamEvery; a snapshot share's stream sends nothing more but
// stays open. It follows the conversation through the hub as its owner's
// reads would, opened for the share (stream.OpenParams.ShareID), so that
// the share's revocation ends it on every server; its expiry ends it by
// its own deadline. Every state is SharedState, read anew, so what a
// share hides is hidden the same way here.
//
// It returns send's error as it is; stream.ErrShareEnded (NotFound
// "share does not exist") when the share is revoked or expires, or the
// token opens nothing; the subscription's other ends (stream.ErrClosed,
// a subscriber that fell behind: the client opens it again) and ctx's
// error.
func (f ShareStream) Follow(ctx context.Context, token string, send func(*convov1.GetSharedConversationResponse) error) error {
	share, err := f.Store.ShareByToken(ctx, token)
	if err != nil {
		return err
	}
	owner, err := f.Store.ConversationOwner(ctx, share.ConversationID)
	if err != nil {
		return err
	}
	if share.ExpiresAt != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, *share.ExpiresAt, errShareExpired)
		defer cancel()
	}
	state, err := SharedState(ctx, f.Store, f.URLs, token)
	if err != nil {
		return shareStreamEnd(ctx, err)
	}
	// Opened after the read, resuming after its seq: every event since
	// comes through (a resume too far behind starts from a snapshot,
	// which is only a sign that something changed).
	seq := state.GetSeq()
	sub, err := f.Hub.Open(ctx, stream.OpenParams{
		OwnerID: owner, ConversationID: share.ConversationID, AfterSeq: &seq, Branches: true, ShareID: share.ID,
	})
	if err != nil {
		return shareStreamEnd(ctx, err)
	}
	defer sub.Close()
	_, changed := sub.Snapshot()
	sub.ReleaseSnapshot()
	if err := send(state); err != nil {
		return err
	}
	live := share.Mode == conversation.ShareLive
	last := time.Now()
	for {
		if !changed {
			item, err := f.next(ctx, sub, last)
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
		if wait := time.Until(last.Add(ShareStreamEvery)); wait > 0 {
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
		state, err := SharedState(ctx, f.Store, f.URLs, token)
		if err != nil {
			return shareStreamEnd(ctx, err)
		}
		if err := send(state); err != nil {
			return err
		}
		last, changed = time.Now(), false
	}
}

// next waits for the subscription's next item, calling Idle whenever the
// stream has written nothing for KeepAlive since wrote (the last state
// sent): a snapshot share's stream takes every event of a busy
// conversation and sends none, so silence is counted from the last
// write, not the last item.
func (f ShareStream) next(ctx context.Context, sub *Subscription, wrote time.Time) (*Item, error) {
	if f.KeepAlive <= 0 || f.Idle == nil {
		return sub.Next(ctx)
	}
	for {
		wait, cancel := context.WithDeadline(ctx, wrote.Add(f.KeepAlive))
		item, err := sub.Next(wait)
		idle := err != nil && wait.Err() != nil && ctx.Err() == nil
		cancel()
		if !idle {
			return item, err
		}
		// Next gave up only because the interval passed; it consumed
		// nothing, so it is safe to call again.
		if err := f.Idle(); err != nil {
			return nil, err
		}
		wrote = time.Now()
	}
}

// errShareExpired is the cause of a share stream's deadline, its
// share's expiry: a caller's own deadline is not an expiry.
var errShareExpired = errors.New("the share expired")

// shareStreamEnd is how a share's stream ends on err: a share that
// expired (the stream's deadline) ends as a revoked one does, NotFound
// "share does not exist".
func shareStreamEnd(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), errShareExpired) {
		return stream.ErrShareEnded
	}
	return err
}
