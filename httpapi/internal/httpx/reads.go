package httpx

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	"github.com/convo-dev/convo/wire"
)

// PageTokenParam is the query parameter of a whole-conversation read that
// asks for the messages before a page token instead of the latest ones.
const PageTokenParam = "page_token"

// MessagesRead is what a whole-conversation read answers with: the
// latest messages that fit Server.PageBytes (with the conversation's
// state: Seq, PendingInputs), or, with a page token, the page of older
// messages before it; and the token of the messages before those, empty
// when none remain.
type MessagesRead struct {
	State conversation.State
	// OlderPageToken names the messages before State.Messages.
	OlderPageToken string
}

// ReadMessages reads the messages r asks for (see MessagesRead) of the
// owner's conversation id: the latest, or, with ?page_token=, the page
// before it, whose State has the conversation (its Seq its last_seq) and
// no PendingInputs (an older page's messages are finished). A malformed
// token is InvalidArgument naming page_token.
func (s *Server) ReadMessages(r *http.Request, owner string, id uuid.UUID) (MessagesRead, error) {
	ctx := r.Context()
	var out MessagesRead
	if token := r.URL.Query().Get(PageTokenParam); token != "" {
		before, err := wire.DecodeMessagesToken(PageTokenParam, token)
		if err != nil {
			return MessagesRead{}, err
		}
		conv, err := s.Store.Conversation(ctx, owner, id)
		if err != nil {
			return MessagesRead{}, err
		}
		page, err := s.Store.OlderMessages(ctx, owner, id, before, s.PageBytes)
		if err != nil {
			return MessagesRead{}, err
		}
		out.State = conversation.State{Conversation: conv, Seq: conv.LastSeq, Messages: page.Messages, Older: page.Older}
	} else {
		st, err := s.Store.RecentState(ctx, owner, id, s.PageBytes)
		if err != nil {
			return MessagesRead{}, err
		}
		out.State = st
	}
	if out.State.Older && len(out.State.Messages) > 0 {
		out.OlderPageToken = wire.EncodeMessagesToken(out.State.Messages[0].Position)
	}
	return out, nil
}
