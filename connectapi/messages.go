package connectapi

import (
	"context"
	"encoding/json"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

func (s *service) SendMessage(ctx context.Context, req *connect.Request[convov1.SendMessageRequest]) (*connect.Response[convov1.SendMessageResponse], error) {
	owner, err := user(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	conversationID, err := wire.OptionalID("conversationId", m.GetConversationId())
	if err != nil {
		return nil, err
	}
	parentID, err := wire.OptionalID("parentMessageId", m.GetParentMessageId())
	if err != nil {
		return nil, err
	}
	if parentID.Valid && !conversationID.Valid {
		return nil, wire.Invalid("parentMessageId", "is set, and conversationId is not: a new conversation has no messages to follow")
	}
	fileIDs, err := wire.UserMessage("text", m.GetText(), "fileIds", m.GetFileIds(), s.maxFiles)
	if err != nil {
		return nil, err
	}
	configA, err := wire.ModelConfigJSON("model", m.GetModel())
	if err != nil {
		return nil, err
	}
	configs := []json.RawMessage{configA}
	if m.CompareModel != nil {
		configB, err := wire.ModelConfigJSON("compareModel", m.GetCompareModel())
		if err != nil {
			return nil, err
		}
		configs = append(configs, configB)
	}
	policy, err := wire.ParseSendPolicy("sendPolicy", m.GetSendPolicy())
	if err != nil {
		return nil, err
	}
	res, err := s.store.SendMessage(ctx, conversation.SendMessageParams{
		OwnerID: owner, ConversationID: conversationID.UUID, Text: m.GetText(), ModelConfigs: configs,
		ParentMessageID: parentID.UUID, FileIDs: fileIDs, Policy: policy,
	})
	if err != nil {
		return nil, err
	}
	out := &convov1.SendMessageResponse{
		ConversationId:     res.ConversationID.String(),
		UserMessageId:      res.UserMessageID.String(),
		AssistantMessageId: res.AssistantMessageIDs[0].String(),
		PromptId:           res.PromptIDs[0].String(),
		Queued:             res.Queued,
	}
	if len(res.PromptIDs) == 2 {
		out.ComparisonId = wire.NullID(res.ComparisonID)
		out.CompareAssistantMessageId = res.AssistantMessageIDs[1].String()
		out.ComparePromptId = res.PromptIDs[1].String()
	}
	return connect.NewResponse(out), nil
}

// GetConversation returns the conversation's latest messages that fit the
// snapshot size (Options.PageBytes), every block as it stands, and an
// older_page_token when older ones were left out.
func (s *service) GetConversation(ctx context.Context, req *connect.Request[convov1.GetConversationRequest]) (*connect.Response[convov1.GetConversationResponse], error) {
	owner, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	// The latest messages, as a snapshot holds them: a whole
	// conversation of any length, held until a client that may never
	// read it has read it, is what a stream's snapshot stopped being.
	st, err := s.store.RecentState(ctx, owner, id, s.pageBytes)
	if err != nil {
		return nil, err
	}
	messages, err := wire.Messages(st.Messages)
	if err != nil {
		return nil, err
	}
	wire.SignFiles(s.urls, messages...)
	out := &convov1.GetConversationResponse{Conversation: wire.Conversation(st.Conversation), Messages: messages, Seq: st.Seq}
	if st.Older && len(st.Messages) > 0 {
		out.OlderPageToken = wire.EncodeMessagesToken(st.Messages[0].Position)
	}
	if req.Msg.GetIncludePauseEvents() {
		if out.PendingInputs, err = wire.InputRequests(st.PendingInputs); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(out), nil
}

// ListMessages returns the page of older messages that a page token names
// (see Snapshot.older_page_token).
func (s *service) ListMessages(ctx context.Context, req *connect.Request[convov1.ListMessagesRequest]) (*connect.Response[convov1.ListMessagesResponse], error) {
	owner, id, err := userAndID(ctx, "conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	before, err := wire.DecodeMessagesToken("pageToken", req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	page, err := s.store.OlderMessages(ctx, owner, id, before, s.pageBytes)
	if err != nil {
		return nil, err
	}
	messages, err := wire.Messages(page.Messages)
	if err != nil {
		return nil, err
	}
	wire.SignFiles(s.urls, messages...)
	out := &convov1.ListMessagesResponse{Messages: messages}
	if page.Older && len(page.Messages) > 0 {
		out.NextPageToken = wire.EncodeMessagesToken(page.Messages[0].Position)
	}
	return connect.NewResponse(out), nil
}

func (s *service) CancelPrompt(ctx context.Context, req *connect.Request[convov1.CancelPromptRequest]) (*connect.Response[convov1.CancelPromptResponse], error) {
	owner, id, err := userAndID(ctx, "promptId", req.Msg.GetPromptId())
	if err != nil {
		return nil, err
	}
	cancelled, err := s.store.CancelPrompt(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.CancelPromptResponse{Cancelled: cancelled}), nil
}

// DeleteQueuedMessage takes back a queued send (its user message and
// pending replies) before its turn; FailedPrecondition once its reply
// started.
func (s *service) DeleteQueuedMessage(ctx context.Context, req *connect.Request[convov1.DeleteQueuedMessageRequest]) (*connect.Response[convov1.DeleteQueuedMessageResponse], error) {
	owner, id, err := userAndID(ctx, "messageId", req.Msg.GetMessageId())
	if err != nil {
		return nil, err
	}
	conv, err := s.store.DeleteQueuedMessage(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.DeleteQueuedMessageResponse{ConversationId: conv.String()}), nil
}

func (s *service) SubmitFeedback(ctx context.Context, req *connect.Request[convov1.SubmitFeedbackRequest]) (*connect.Response[convov1.SubmitFeedbackResponse], error) {
	owner, id, err := userAndID(ctx, "messageId", req.Msg.GetMessageId())
	if err != nil {
		return nil, err
	}
	var rating conversation.Rating
	switch req.Msg.GetRating() {
	case convov1.Rating_RATING_UP:
		rating = conversation.RatingUp
	case convov1.Rating_RATING_DOWN:
		rating = conversation.RatingDown
	default:
		return nil, wire.Invalid("rating", "must be RATING_UP or RATING_DOWN, got %v", req.Msg.GetRating())
	}
	if err := wire.CheckText("comment", req.Msg.GetComment(), false, wire.MaxComment); err != nil {
		return nil, err
	}
	msg, err := s.store.SubmitFeedback(ctx, owner, id, rating, req.Msg.GetComment())
	if err != nil {
		return nil, err
	}
	s.recordVotes(ctx, owner, feedbackVote(msg, rating, req.Msg.GetComment() != ""))
	pm, err := wire.Message(msg)
	if err != nil {
		return nil, err
	}
	wire.SignFiles(s.urls, pm)
	return connect.NewResponse(&convov1.SubmitFeedbackResponse{Message: pm}), nil
}

func (s *service) GetTrace(ctx context.Context, req *connect.Request[convov1.GetTraceRequest]) (*connect.Response[convov1.GetTraceResponse], error) {
	owner, err := user(ctx)
	if err != nil {
		return nil, err
	}
	var promptID, messageID uuid.NullUUID
	switch t := req.Msg.GetTarget().(type) {
	case *convov1.GetTraceRequest_PromptId:
		id, err := wire.RequireID("promptId", t.PromptId)
		if err != nil {
			return nil, err
		}
		promptID = uuid.NullUUID{UUID: id, Valid: true}
	case *convov1.GetTraceRequest_MessageId:
		id, err := wire.RequireID("messageId", t.MessageId)
		if err != nil {
			return nil, err
		}
		messageID = uuid.NullUUID{UUID: id, Valid: true}
	default:
		return nil, wire.Invalid("target", "set promptId or messageId")
	}
	tr, err := s.store.Trace(ctx, owner, promptID, messageID)
	if err != nil {
		return nil, err
	}
	pt, err := wire.Trace(tr, s.now())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.GetTraceResponse{Trace: pt}), nil
}

func (s *service) SearchMessages(ctx context.Context, req *connect.Request[convov1.SearchMessagesRequest]) (*connect.Response[convov1.SearchMessagesResponse], error) {
	owner, err := user(ctx)
	if err != nil {
		return nil, err
	}
	// Every call counts against the limits, a refused query too.
	release, err := s.searches.Acquire(owner)
	if err != nil {
		return nil, err
	}
	defer release()
	query, err := wire.SearchQuery("query", req.Msg.GetQuery())
	if err != nil {
		return nil, err
	}
	limit, err := wire.PageSize("pageSize", req.Msg.GetPageSize(), wire.MaxSearchResults)
	if err != nil {
		return nil, err
	}
	results, err := s.store.Search(ctx, owner, query, limit)
	if err != nil {
		return nil, err
	}
	out := &convov1.SearchMessagesResponse{}
	for _, r := range results {
		out.Results = append(out.Results, wire.SearchResult(r))
	}
	return connect.NewResponse(out), nil
}
