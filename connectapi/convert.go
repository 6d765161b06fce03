package connectapi

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// The event log stores payloads in proto3 JSON; fields a newer schema adds
// must not break an older server.
var payloadJSON = protojson.UnmarshalOptions{DiscardUnknown: true}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tsPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func idString(id uuid.NullUUID) string {
	if !id.Valid {
		return ""
	}
	return id.UUID.String()
}

func conversationToProto(c conversation.Conversation) *convov1.Conversation {
	return &convov1.Conversation{
		Id: c.ID.String(), Title: c.Title, ActivePromptId: idString(c.ActivePromptID),
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt), LastMessageAt: ts(c.LastMessageAt),
	}
}

func messageToProto(m conversation.Message) (*convov1.Message, error) {
	out := &convov1.Message{
		Id: m.ID.String(), ConversationId: m.ConversationID.String(), Role: string(m.Role),
		Status: string(m.Status), PromptId: idString(m.PromptID),
		CreatedAt: ts(m.CreatedAt), UpdatedAt: ts(m.UpdatedAt),
		ComparisonId: idString(m.ComparisonID), ComparisonSlot: m.ComparisonSlot,
	}
	if f := m.Feedback; f != nil {
		out.Feedback = &convov1.Feedback{Rating: ratingToProto(f.Rating), Comment: f.Comment, CreatedAt: ts(f.CreatedAt)}
	}
	for _, b := range m.Blocks {
		pb, err := blockToProto(b)
		if err != nil {
			return nil, err
		}
		out.Blocks = append(out.Blocks, pb)
	}
	return out, nil
}

func messagesToProto(ms []conversation.Message) ([]*convov1.Message, error) {
	out := make([]*convov1.Message, len(ms))
	for i, m := range ms {
		pm, err := messageToProto(m)
		if err != nil {
			return nil, err
		}
		out[i] = pm
	}
	return out, nil
}

func blockToProto(b conversation.Block) (*convov1.Block, error) {
	out := &convov1.Block{
		Id: b.ID.String(), BlockType: b.Type, Content: b.Content, Status: string(b.Status), Position: int32(b.Position),
	}
	var err error
	if out.Metadata, err = jsonStruct(b.Metadata); err != nil {
		return nil, fmt.Errorf("block %s metadata: %w", b.ID, err)
	}
	if tc := b.ToolCall; tc != nil {
		if out.ToolCall, err = toolCallToProto(*tc); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func toolCallToProto(tc conversation.ToolCall) (*convov1.ToolCall, error) {
	input := &structpb.Value{}
	if err := payloadJSON.Unmarshal(tc.Input, input); err != nil {
		return nil, fmt.Errorf("tool call %s input: %w", tc.ID, err)
	}
	return &convov1.ToolCall{
		Id: tc.ID.String(), BlockId: tc.BlockID.String(), Name: tc.Name, Status: string(tc.Status),
		Input: input, Output: tc.Output, Error: tc.Error,
		StartedAt: ts(tc.StartedAt), EndedAt: tsPtr(tc.EndedAt),
	}, nil
}

func jsonStruct(raw json.RawMessage) (*structpb.Struct, error) {
	s := &structpb.Struct{}
	if len(raw) == 0 {
		return s, nil
	}
	if err := payloadJSON.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	return s, nil
}

func promptToProto(p conversation.Prompt) (*convov1.Prompt, error) {
	cfg, err := jsonStruct(p.ModelConfig)
	if err != nil {
		return nil, fmt.Errorf("prompt %s model config: %w", p.ID, err)
	}
	return &convov1.Prompt{
		Id: p.ID.String(), ConversationId: p.ConversationID.String(), MessageId: p.MessageID.String(),
		Status: string(p.Status), ModelConfig: cfg, Error: p.Error,
		CreatedAt: ts(p.CreatedAt), StartedAt: tsPtr(p.StartedAt), EndedAt: tsPtr(p.EndedAt),
	}, nil
}

// eventToProto decodes an event's payload (proto3 JSON of the message for
// its kind) into the Event oneof.
func eventToProto(e conversation.Event) (*convov1.Event, error) {
	out := &convov1.Event{Seq: e.Seq, CreatedAt: ts(e.CreatedAt), Replay: e.Replay}
	var body proto.Message
	switch e.Kind {
	case conversation.EventMessageCreated:
		m := &convov1.MessageCreated{}
		out.Kind, body = &convov1.Event_MessageCreated{MessageCreated: m}, m
	case conversation.EventMessageUpdated:
		m := &convov1.MessageUpdated{}
		out.Kind, body = &convov1.Event_MessageUpdated{MessageUpdated: m}, m
	case conversation.EventPromptQueued:
		m := &convov1.PromptQueued{}
		out.Kind, body = &convov1.Event_PromptQueued{PromptQueued: m}, m
	case conversation.EventPromptStarted:
		m := &convov1.PromptStarted{}
		out.Kind, body = &convov1.Event_PromptStarted{PromptStarted: m}, m
	case conversation.EventPromptCompleted:
		m := &convov1.PromptCompleted{}
		out.Kind, body = &convov1.Event_PromptCompleted{PromptCompleted: m}, m
	case conversation.EventPromptFailed:
		m := &convov1.PromptFailed{}
		out.Kind, body = &convov1.Event_PromptFailed{PromptFailed: m}, m
	case conversation.EventPromptCancelled:
		m := &convov1.PromptCancelled{}
		out.Kind, body = &convov1.Event_PromptCancelled{PromptCancelled: m}, m
	case conversation.EventBlockStart:
		m := &convov1.BlockStart{}
		out.Kind, body = &convov1.Event_BlockStart{BlockStart: m}, m
	case conversation.EventBlockDelta:
		m := &convov1.BlockDelta{}
		out.Kind, body = &convov1.Event_BlockDelta{BlockDelta: m}, m
	case conversation.EventBlockEnd:
		m := &convov1.BlockEnd{}
		out.Kind, body = &convov1.Event_BlockEnd{BlockEnd: m}, m
	case conversation.EventToolCallStarted:
		m := &convov1.ToolCallStarted{}
		out.Kind, body = &convov1.Event_ToolCallStarted{ToolCallStarted: m}, m
	case conversation.EventToolCallProgress:
		m := &convov1.ToolCallProgress{}
		out.Kind, body = &convov1.Event_ToolCallProgress{ToolCallProgress: m}, m
	case conversation.EventToolCallCompleted:
		m := &convov1.ToolCallCompleted{}
		out.Kind, body = &convov1.Event_ToolCallCompleted{ToolCallCompleted: m}, m
	case conversation.EventToolCallFailed:
		m := &convov1.ToolCallFailed{}
		out.Kind, body = &convov1.Event_ToolCallFailed{ToolCallFailed: m}, m
	case conversation.EventConversationUpdated:
		m := &convov1.ConversationUpdated{}
		out.Kind, body = &convov1.Event_ConversationUpdated{ConversationUpdated: m}, m
	case conversation.EventHistoryCleared:
		m := &convov1.HistoryCleared{}
		out.Kind, body = &convov1.Event_HistoryCleared{HistoryCleared: m}, m
	default:
		return nil, fmt.Errorf("event %d: unknown kind %q", e.Seq, e.Kind)
	}
	if err := payloadJSON.Unmarshal(e.Payload, body); err != nil {
		return nil, fmt.Errorf("event %d (%s): decode payload: %w", e.Seq, e.Kind, err)
	}
	return out, nil
}

func eventsToProto(events []conversation.Event) ([]*convov1.Event, error) {
	out := make([]*convov1.Event, len(events))
	for i, e := range events {
		pe, err := eventToProto(e)
		if err != nil {
			return nil, err
		}
		out[i] = pe
	}
	return out, nil
}

func traceToProto(tr conversation.Trace, now time.Time) (*convov1.Trace, error) {
	prompt, err := promptToProto(tr.Prompt)
	if err != nil {
		return nil, err
	}
	events, err := eventsToProto(tr.Events)
	if err != nil {
		return nil, err
	}
	out := &convov1.Trace{Prompt: prompt, Events: events}
	if start := tr.Prompt.StartedAt; start != nil {
		end := now
		if tr.Prompt.EndedAt != nil {
			end = *tr.Prompt.EndedAt
		}
		out.Duration = durationpb.New(end.Sub(*start))
		out.QueueTime = durationpb.New(start.Sub(tr.Prompt.CreatedAt))
	}
	return out, nil
}

func ratingToProto(r conversation.Rating) convov1.Rating {
	switch r {
	case conversation.RatingUp:
		return convov1.Rating_RATING_UP
	case conversation.RatingDown:
		return convov1.Rating_RATING_DOWN
	}
	return convov1.Rating_RATING_UNSPECIFIED
}

func preferenceToProto(p conversation.Preference) convov1.Preference {
	switch p {
	case conversation.PreferA:
		return convov1.Preference_PREFERENCE_A
	case conversation.PreferB:
		return convov1.Preference_PREFERENCE_B
	case conversation.PreferTie:
		return convov1.Preference_PREFERENCE_TIE
	}
	return convov1.Preference_PREFERENCE_UNSPECIFIED
}

func comparisonToProto(c conversation.Comparison) (*convov1.Comparison, error) {
	side := func(s conversation.ComparisonSide) (*convov1.ComparisonSide, error) {
		cfg := &convov1.ModelConfig{}
		if err := payloadJSON.Unmarshal(s.ModelConfig, cfg); err != nil {
			return nil, fmt.Errorf("comparison %s model config: %w", c.ID, err)
		}
		return &convov1.ComparisonSide{
			PromptId: s.PromptID.String(), MessageId: s.MessageID.String(), ModelConfig: cfg, Status: string(s.Status),
		}, nil
	}
	a, err := side(c.A)
	if err != nil {
		return nil, err
	}
	b, err := side(c.B)
	if err != nil {
		return nil, err
	}
	return &convov1.Comparison{
		Id: c.ID.String(), ConversationId: c.ConversationID.String(), UserMessageId: c.UserMessageID.String(),
		A: a, B: b, Preference: preferenceToProto(c.Preference), VotedAt: tsPtr(c.VotedAt), CreatedAt: ts(c.CreatedAt),
	}, nil
}

func searchResultToProto(r conversation.SearchResult) *convov1.SearchResult {
	out := &convov1.SearchResult{
		ConversationId: r.ConversationID.String(), ConversationTitle: r.ConversationTitle,
		MessageId: r.MessageID.String(), Role: string(r.Role), Snippet: r.Snippet,
		Rank: r.Rank, CreatedAt: ts(r.CreatedAt),
	}
	for _, h := range r.Highlights {
		out.Highlights = append(out.Highlights, &convov1.Highlight{Start: int32(h.Start), End: int32(h.End)})
	}
	return out
}
