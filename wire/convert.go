package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/convo-dev/convo/conversation"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/internal/jsonlimit"
)

// The event log stores payloads in proto3 JSON; fields a newer schema adds
// must not break an older server.
var payloadJSON = protojson.UnmarshalOptions{DiscardUnknown: true}

// unmarshalStored decodes stored JSON (an event's payload, a block's
// metadata, a tool call's input, a model configuration, …) into m. A
// value that protojson cannot decode because it breaks convo's rule for
// JSON (internal/jsonlimit) — a number past float64's range (1e400),
// nesting past protojson's limit — can only be one stored before the
// rule was applied at every door; it is decoded again from
// jsonlimit.Sanitize's copy, where it reads as a marked placeholder
// string (jsonlimit.PlaceholderNumber, PlaceholderDeep), so one such value
// never makes a conversation unreadable. Valid JSON is decoded once, at
// no extra cost. Any other failure is returned as it is.
func unmarshalStored(raw []byte, m proto.Message) error {
	err := payloadJSON.Unmarshal(raw, m)
	if err == nil || jsonlimit.Valid(raw) {
		return err // decoded, or failed for another reason than the rule
	}
	proto.Reset(m)
	if payloadJSON.Unmarshal(jsonlimit.Sanitize(raw), m) != nil {
		return err
	}
	return nil
}

// unmarshalFields decodes a stored JSON object into m as unmarshalStored
// does, and when that fails, member by member, leaving out the members
// that do not decode: a typed message (a ModelConfig) has no place for a
// placeholder, and the SQL API stores any JSON object as a model
// configuration ({"temperature": "hot"}, {"maxTokens": 1e400}).
func unmarshalFields(raw []byte, m proto.Message) error {
	err := unmarshalStored(raw, m)
	if err == nil {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(jsonlimit.Sanitize(raw), &members) != nil {
		return err
	}
	proto.Reset(m)
	for name, value := range members {
		one, merr := json.Marshal(map[string]json.RawMessage{name: value})
		if merr != nil {
			continue
		}
		field := m.ProtoReflect().New().Interface()
		if payloadJSON.Unmarshal(one, field) == nil {
			proto.Merge(m, field)
		}
	}
	return nil
}

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

// NullID is id as a string, or "" when it is null.
func NullID(id uuid.NullUUID) string {
	if !id.Valid {
		return ""
	}
	return id.UUID.String()
}

// Conversation is c in its wire form.
func Conversation(c conversation.Conversation) *convov1.Conversation {
	return &convov1.Conversation{
		Id: c.ID.String(), Title: c.Title, ActivePromptId: NullID(c.ActivePromptID),
		CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt), LastMessageAt: ts(c.LastMessageAt),
		SendPolicy: SendPolicy(c.SendPolicy),
		Role:       string(c.Role),
	}
}

// SendPolicy is p in its wire form (SEND_POLICY_UNSPECIFIED for the
// default).
func SendPolicy(p conversation.SendPolicy) convov1.SendPolicy {
	switch p {
	case conversation.SendPolicyEnqueue:
		return convov1.SendPolicy_SEND_POLICY_ENQUEUE
	case conversation.SendPolicyInterrupt:
		return convov1.SendPolicy_SEND_POLICY_INTERRUPT
	case conversation.SendPolicyReject:
		return convov1.SendPolicy_SEND_POLICY_REJECT
	}
	return convov1.SendPolicy_SEND_POLICY_UNSPECIFIED
}

// ParseSendPolicy is the send policy p names; InvalidArgument naming
// field for a value the enum does not define.
func ParseSendPolicy(field string, p convov1.SendPolicy) (conversation.SendPolicy, error) {
	switch p {
	case convov1.SendPolicy_SEND_POLICY_UNSPECIFIED:
		return conversation.SendPolicyDefault, nil
	case convov1.SendPolicy_SEND_POLICY_ENQUEUE:
		return conversation.SendPolicyEnqueue, nil
	case convov1.SendPolicy_SEND_POLICY_INTERRUPT:
		return conversation.SendPolicyInterrupt, nil
	case convov1.SendPolicy_SEND_POLICY_REJECT:
		return conversation.SendPolicyReject, nil
	}
	return "", Invalid(field, "must be SEND_POLICY_ENQUEUE, SEND_POLICY_INTERRUPT, SEND_POLICY_REJECT or unset, got %d", int32(p))
}

// Member is m in its wire form.
func Member(m conversation.Member) *convov1.Member {
	return &convov1.Member{UserId: m.UserID, Role: string(m.Role), AddedAt: ts(m.AddedAt), AddedBy: m.AddedBy}
}

// Message is m in its wire form, with its blocks. It fails only for a
// block whose JSON payload does not decode.
func Message(m conversation.Message) (*convov1.Message, error) {
	out := &convov1.Message{
		Id: m.ID.String(), ConversationId: m.ConversationID.String(), Role: string(m.Role), SenderId: m.SenderID,
		Status: string(m.Status), PromptId: NullID(m.PromptID),
		CreatedAt: ts(m.CreatedAt), UpdatedAt: ts(m.UpdatedAt),
		ComparisonId: NullID(m.ComparisonID), ComparisonSlot: m.ComparisonSlot,
		ParentId: NullID(m.ParentID), SiblingCount: int32(m.SiblingCount), SiblingIndex: int32(m.SiblingIndex),
		Error: m.Error, Queued: m.Queued,
	}
	if f := m.Feedback; f != nil {
		out.Feedback = &convov1.Feedback{Rating: Rating(f.Rating), Comment: f.Comment, CreatedAt: ts(f.CreatedAt)}
	}
	for _, b := range m.Blocks {
		pb, err := Block(b)
		if err != nil {
			return nil, err
		}
		out.Blocks = append(out.Blocks, pb)
	}
	return out, nil
}

// Messages is ms in their wire form (see Message).
func Messages(ms []conversation.Message) ([]*convov1.Message, error) {
	out := make([]*convov1.Message, len(ms))
	for i, m := range ms {
		pm, err := Message(m)
		if err != nil {
			return nil, err
		}
		out[i] = pm
	}
	return out, nil
}

// Block is b in its wire form.
func Block(b conversation.Block) (*convov1.Block, error) {
	out := &convov1.Block{
		Id: b.ID.String(), BlockType: b.Type, Content: b.Content, Status: string(b.Status), Position: int32(b.Position),
	}
	var err error
	if out.Metadata, err = jsonStruct(b.Metadata); err != nil {
		return nil, fmt.Errorf("block %s metadata: %w", b.ID, err)
	}
	out.File = fileOf(b.Type, out.Metadata)
	if tc := b.ToolCall; tc != nil {
		if out.ToolCall, err = ToolCall(*tc); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ToolCall is tc in its wire form.
func ToolCall(tc conversation.ToolCall) (*convov1.ToolCall, error) {
	input := &structpb.Value{}
	if err := unmarshalStored(tc.Input, input); err != nil {
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
	if err := unmarshalStored(raw, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Prompt is p in its wire form.
func Prompt(p conversation.Prompt) (*convov1.Prompt, error) {
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

// eventKinds is the Event oneof: its fields' JSON names are the event
// kinds of the log (conversation.EventKind), and their messages the
// payloads.
var eventKinds = (&convov1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")

// Event decodes a logged event: its payload (proto3 JSON of the message for
// its kind) into the Event oneof field named by its kind. An unknown kind
// or a payload that does not decode is an error.
func Event(e conversation.Event) (*convov1.Event, error) {
	fd := eventKinds.Fields().ByJSONName(string(e.Kind))
	if fd == nil {
		return nil, fmt.Errorf("event %d: unknown kind %q", e.Seq, e.Kind)
	}
	out := &convov1.Event{Seq: e.Seq, CreatedAt: ts(e.CreatedAt), Replay: e.Replay}
	body := out.ProtoReflect().Mutable(fd).Message().Interface()
	if err := unmarshalStored(e.Payload, body); err != nil {
		return nil, fmt.Errorf("event %d (%s): decode payload: %w", e.Seq, e.Kind, err)
	}
	return out, nil
}

// NewEvent returns the event of seq whose kind is the message kind (a
// *convov1.BlockDelta, …). kind must be one of the Event oneof's messages.
func NewEvent(seq int64, at time.Time, kind proto.Message) *convov1.Event {
	e := &convov1.Event{Seq: seq, CreatedAt: ts(at)}
	name := kind.ProtoReflect().Descriptor().FullName()
	fields := eventKinds.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Message().FullName() == name {
			e.ProtoReflect().Set(fd, protoreflect.ValueOfMessage(kind.ProtoReflect()))
			return e
		}
	}
	panic(fmt.Sprintf("wire.NewEvent: %s is not an event kind", name))
}

// Events is events in their wire form (see Event).
func Events(events []conversation.Event) ([]*convov1.Event, error) {
	out := make([]*convov1.Event, len(events))
	for i, e := range events {
		pe, err := Event(e)
		if err != nil {
			return nil, err
		}
		out[i] = pe
	}
	return out, nil
}

// Trace is tr in its wire form; a running prompt's duration runs to now.
func Trace(tr conversation.Trace, now time.Time) (*convov1.Trace, error) {
	prompt, err := Prompt(tr.Prompt)
	if err != nil {
		return nil, err
	}
	events, err := Events(tr.Events)
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

// Rating is r in its wire form.
func Rating(r conversation.Rating) convov1.Rating {
	switch r {
	case conversation.RatingUp:
		return convov1.Rating_RATING_UP
	case conversation.RatingDown:
		return convov1.Rating_RATING_DOWN
	}
	return convov1.Rating_RATING_UNSPECIFIED
}

// Preference is p in its wire form.
func Preference(p conversation.Preference) convov1.Preference {
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

// Comparison is c in its wire form.
func Comparison(c conversation.Comparison) (*convov1.Comparison, error) {
	side := func(s conversation.ComparisonSide) (*convov1.ComparisonSide, error) {
		cfg := &convov1.ModelConfig{}
		if err := unmarshalFields(s.ModelConfig, cfg); err != nil {
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
		A: a, B: b, Preference: Preference(c.Preference), VotedAt: tsPtr(c.VotedAt), CreatedAt: ts(c.CreatedAt),
	}, nil
}

// SearchResult is r in its wire form.
func SearchResult(r conversation.SearchResult) *convov1.SearchResult {
	out := &convov1.SearchResult{
		ConversationId: r.ConversationID.String(), ConversationTitle: r.ConversationTitle,
		MessageId: r.MessageID.String(), BlockId: r.BlockID.String(), Role: string(r.Role), Snippet: r.Snippet,
		Rank: r.Rank, CreatedAt: ts(r.CreatedAt),
	}
	for _, h := range r.Highlights {
		out.Highlights = append(out.Highlights, &convov1.Highlight{Start: int32(h.Start), End: int32(h.End)})
	}
	return out
}
