package connectapi

import (
	"context"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/wire"
)

func (s *service) VoteComparison(ctx context.Context, req *connect.Request[convov1.VoteComparisonRequest]) (*connect.Response[convov1.VoteComparisonResponse], error) {
	owner, id, err := userAndID(ctx, "comparisonId", req.Msg.GetComparisonId())
	if err != nil {
		return nil, err
	}
	var pref conversation.Preference
	switch req.Msg.GetPreference() {
	case convov1.Preference_PREFERENCE_A:
		pref = conversation.PreferA
	case convov1.Preference_PREFERENCE_B:
		pref = conversation.PreferB
	case convov1.Preference_PREFERENCE_TIE:
		pref = conversation.PreferTie
	default:
		return nil, wire.Invalid("preference", "must be PREFERENCE_A, PREFERENCE_B or PREFERENCE_TIE, got %v", req.Msg.GetPreference())
	}
	c, err := s.store.VoteComparison(ctx, owner, id, pref)
	if err != nil {
		return nil, err
	}
	s.recordVotes(ctx, owner, comparisonVotes(c)...)
	pc, err := wire.Comparison(c)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&convov1.VoteComparisonResponse{Comparison: pc}), nil
}

func (s *service) ListComparisons(ctx context.Context, req *connect.Request[convov1.ListComparisonsRequest]) (*connect.Response[convov1.ListComparisonsResponse], error) {
	owner, err := user(ctx)
	if err != nil {
		return nil, err
	}
	conversationID, err := wire.OptionalID("conversationId", req.Msg.GetConversationId())
	if err != nil {
		return nil, err
	}
	limit, after, err := wire.Page(req.Msg.GetPageSize(), req.Msg.GetPageToken())
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListComparisons(ctx, owner, conversationID, limit+1, after)
	if err != nil {
		return nil, err
	}
	out := &convov1.ListComparisonsResponse{}
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		out.NextPageToken = wire.EncodePageToken(conversation.PageCursor{Time: last.CreatedAt, ID: last.ID})
	}
	for _, c := range list {
		pc, err := wire.Comparison(c)
		if err != nil {
			return nil, err
		}
		out.Comparisons = append(out.Comparisons, pc)
	}
	return connect.NewResponse(out), nil
}
