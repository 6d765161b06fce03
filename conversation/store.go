package conversation

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
)

// SendMessageParams is a user's message and the generation it asks for.
type SendMessageParams struct {
	OwnerID string
	// ConversationID is uuid.Nil to start a new conversation.
	ConversationID uuid.UUID
	Text           string
	// ModelConfigs holds one JSON object per prompt to queue: one for a
	// normal reply, two for an A/B comparison.
	ModelConfigs []json.RawMessage
	// ParentMessageID, unless uuid.Nil, is the message the caller shows as
	// the active leaf: when the leaf is another, SendMessage fails with
	// FailedPrecondition naming the current one and writes nothing.
	ParentMessageID uuid.UUID
	// FileIDs are the files the message holds (the owner's uploads), in
	// order, each a "file" block after the text; another owner's or an
	// unknown one is NotFound, and nothing is written. With files, Text
	// may be empty.
	FileIDs []uuid.UUID
	// Policy is what the send does while a reply of the conversation is
	// queued or running; "" (SendPolicyDefault): the conversation's, else
	// SendPolicyEnqueue.
	Policy SendPolicy
}

// SendMessageResult names what SendMessage created.
type SendMessageResult struct {
	ConversationID      uuid.UUID
	UserMessageID       uuid.UUID
	AssistantMessageIDs []uuid.UUID
	PromptIDs           []uuid.UUID
	// ComparisonID is set when two prompts were queued (an A/B comparison).
	ComparisonID uuid.NullUUID
	// Queued is true when the send was enqueued behind a reply in
	// flight: its prompts are claimable only once that reply ends.
	Queued bool
}

// RegenerateParams names the reply to write again.
type RegenerateParams struct {
	OwnerID        string
	ConversationID uuid.UUID
	// MessageID is the reply to write again; none: the active path's
	// latest.
	MessageID uuid.NullUUID
	// ModelConfig is the new prompt's model configuration (a JSON object);
	// nil: the replaced reply's.
	ModelConfig json.RawMessage
}

// RegenerateResult names the new reply and its prompt.
type RegenerateResult struct {
	MessageID uuid.UUID
	PromptID  uuid.UUID
}

// EditParams names the user message to edit and its new text.
type EditParams struct {
	OwnerID        string
	ConversationID uuid.UUID
	MessageID      uuid.UUID
	Text           string
	// ModelConfig is the reply's model configuration (a JSON object);
	// nil: the old message's reply's.
	ModelConfig json.RawMessage
	// FileIDs are the files the new version holds, as SendMessageParams'.
	FileIDs []uuid.UUID
}

// EditResult names the new version of the message, its reply and the
// reply's prompt.
type EditResult struct {
	UserMessageID      uuid.UUID
	AssistantMessageID uuid.UUID
	PromptID           uuid.UUID
}

// SendAfterParams names the message to continue after and the user's
// text.
type SendAfterParams struct {
	OwnerID        string
	ConversationID uuid.UUID
	// AfterMessageID is the message the user's follows (a reply).
	AfterMessageID uuid.UUID
	Text           string
	// ModelConfig is the reply's model configuration (a JSON object).
	ModelConfig json.RawMessage
	// FileIDs are the files the user's message holds, as
	// SendMessageParams.FileIDs; with files, Text may be empty.
	FileIDs []uuid.UUID
}

// AppendMessagesParams are the messages AppendMessages appends.
type AppendMessagesParams struct {
	OwnerID        string
	ConversationID uuid.UUID
	Messages       []AppendedMessage
}

// AppendedMessage is one message AppendMessages appends: a user's (text,
// files, or both) or an assistant's (text).
type AppendedMessage struct {
	Role    Role
	Text    string
	FileIDs []uuid.UUID
}

// SendAfterResult names the user's new message and its reply's prompt.
type SendAfterResult struct {
	UserMessageID uuid.UUID
	PromptID      uuid.UUID
}

// Cursor is a position in one conversation's event log.
type Cursor struct {
	ConversationID uuid.UUID
	AfterSeq       int64
}

// Store persists conversations. Its methods' ownerID is the caller: the
// user whose request it is, the conversation's owner or a member
// (docs/api.md, "Members"). Every method returns *Error values with
// NotFound for an unknown id or a conversation the caller has no role in,
// PermissionDenied for a role that may not do the action (a viewer's
// write; a participant's rename, clear or delete), Invalid for malformed
// input, FailedPrecondition for an illegal state change, and Unavailable
// when the database cannot be reached.
type Store interface {
	Members
	Shares

	// SendMessage appends a completed user message and queues one prompt
	// (with its pending assistant message) per model configuration, in one
	// transaction.
	SendMessage(ctx context.Context, p SendMessageParams) (SendMessageResult, error)

	// RegenerateReply queues a new prompt, with its pending assistant
	// message, as a new version (a sibling) of a reply, and makes it the
	// active leaf; the old reply stays on its branch. FailedPrecondition
	// while a prompt of the conversation is unfinished, for a user message
	// or a reply of an A/B comparison; NotFound for an unknown message or
	// one of another conversation.
	RegenerateReply(ctx context.Context, p RegenerateParams) (RegenerateResult, error)

	// EditMessage makes a new version (a sibling) of a user message with
	// a queued reply below it, and makes the reply the active leaf; the
	// old message stays on its branch. FailedPrecondition while a prompt
	// of the conversation is unfinished, or for a message that is not the
	// user's; NotFound as RegenerateReply; Invalid for empty text.
	EditMessage(ctx context.Context, p EditParams) (EditResult, error)

	// SwitchBranch makes the newest message below messageID (itself when
	// none) the active leaf and returns it. FailedPrecondition while a
	// prompt of the conversation is unfinished; NotFound as
	// RegenerateReply.
	SwitchBranch(ctx context.Context, ownerID string, conversationID, messageID uuid.UUID) (uuid.UUID, error)

	// SendAfter sends the user's text as the message that follows
	// AfterMessageID: that message's branch is made the active path first
	// when it is not (as SwitchBranch), then the text is sent below it
	// when nothing follows it there (as SendMessage, one reply), or is a
	// new version of the user message that follows it (as EditMessage).
	// All or nothing: a refusal of any step writes nothing, the switch
	// included. Errors as SendMessage, EditMessage and SwitchBranch;
	// NotFound for a message that is not the conversation's.
	SendAfter(ctx context.Context, p SendAfterParams) (SendAfterResult, error)

	// SwitchVersion switches to version siblingIndex (from 0, as
	// Message.SiblingIndex numbers them) of the turn of messageID, any
	// version of it, as SwitchBranch to that version would: a client that
	// shows "‹ n / m ›" knows a message and the index, not the other
	// versions' ids. Invalid for an index outside the turn's versions;
	// otherwise as SwitchBranch.
	SwitchVersion(ctx context.Context, ownerID string, conversationID, messageID uuid.UUID, siblingIndex int) (uuid.UUID, error)

	// State reads the conversation, every message of its active path and
	// every block (with the content of streaming blocks up to State.Seq)
	// in one consistent snapshot, so no event falls between the state and
	// State.Seq.
	State(ctx context.Context, ownerID string, conversationID uuid.UUID) (State, error)

	// RecentState reads as State does, but only the latest messages whose
	// size adds up to at most maxBytes (always the newest message, and
	// every message still being written with all that follow it), and sets
	// State.Older when older messages were left out. Its PendingInputs
	// count in the same budget: every open request is there, but an
	// answered one's Answer only while the messages and the requests up to
	// it fit maxBytes (nil past it).
	RecentState(ctx context.Context, ownerID string, conversationID uuid.UUID, maxBytes int) (State, error)

	// OlderMessages reads, as RecentState does, the latest messages before
	// position before that fit in maxBytes (at least one), with every block
	// as it stands. A page of a conversation with no messages there is
	// empty.
	OlderMessages(ctx context.Context, ownerID string, conversationID uuid.UUID, before int64, maxBytes int) (Page, error)

	// Conversation returns the owner's conversation (with LastSeq).
	Conversation(ctx context.Context, ownerID string, id uuid.UUID) (Conversation, error)

	// EventsAfter returns at most limit events of the conversation with seq >
	// afterSeq, oldest first. It does not check ownership: callers reach it
	// only for conversations whose ownership they have checked.
	EventsAfter(ctx context.Context, conversationID uuid.UUID, afterSeq int64, limit int) ([]Event, error)

	// EventsAfterMany does EventsAfter for many conversations in one round
	// trip, returning at most limit events per conversation, grouped by
	// conversation and ordered by seq.
	EventsAfterMany(ctx context.Context, cursors []Cursor, limit int) ([]Event, error)

	// CancelPrompt cancels a queued or running prompt of the owner. It
	// returns false when the prompt was already cancelled and
	// FailedPrecondition when it had completed or failed.
	CancelPrompt(ctx context.Context, ownerID string, promptID uuid.UUID) (bool, error)

	// CreateConversation creates an empty conversation.
	CreateConversation(ctx context.Context, ownerID, title string) (Conversation, error)
	// EnsureConversation returns the owner's conversation with id, creating
	// it empty and untitled when no conversation has that id, so that a
	// client may choose the id of a new conversation (an AG-UI thread id),
	// and whether it created it. NotFound when the id belongs to another
	// owner.
	EnsureConversation(ctx context.Context, ownerID string, id uuid.UUID) (Conversation, bool, error)
	// DeleteUntouchedConversation deletes the owner's conversation when
	// nothing was ever written to it (its event log is empty), and
	// reports whether it did: a request that created a conversation and
	// was then refused leaves nothing behind.
	DeleteUntouchedConversation(ctx context.Context, ownerID string, id uuid.UUID) (bool, error)
	// SetSendPolicy sets the conversation's send policy
	// (SendPolicyDefault: the server's). InvalidArgument for an unknown
	// policy, NotFound for a conversation that is not the owner's.
	SetSendPolicy(ctx context.Context, ownerID string, id uuid.UUID, policy SendPolicy) (Conversation, error)
	// DeleteQueuedMessage takes back the owner's queued user message (a
	// send enqueued behind a reply in flight) with its pending replies
	// before their turn, and returns its conversation's id.
	// FailedPrecondition when the message is not queued (its reply
	// started, a reply's message, or never queued); NotFound when it is
	// not the owner's.
	DeleteQueuedMessage(ctx context.Context, ownerID string, messageID uuid.UUID) (uuid.UUID, error)
	// RenameConversation sets the title (1 to 200 characters).
	RenameConversation(ctx context.Context, ownerID string, id uuid.UUID, title string) (Conversation, error)
	// ClearConversation removes every message, cancelling prompts still
	// running, and keeps the conversation.
	ClearConversation(ctx context.Context, ownerID string, id uuid.UUID) (Conversation, error)
	// DeleteConversation deletes the conversation and everything in it.
	DeleteConversation(ctx context.Context, ownerID string, id uuid.UUID) error
	// ListConversations returns at most limit conversations of the owner,
	// newest LastMessageAt first, after the cursor when it is not nil.
	ListConversations(ctx context.Context, ownerID string, limit int, after *PageCursor) ([]Conversation, error)

	// SubmitFeedback rates an assistant message; a second rating replaces
	// the first. FailedPrecondition for a message that is not an
	// assistant's.
	SubmitFeedback(ctx context.Context, ownerID string, messageID uuid.UUID, rating Rating, comment string) (Message, error)
	// VoteComparison records the owner's preference; a second vote
	// replaces the first.
	VoteComparison(ctx context.Context, ownerID string, id uuid.UUID, preference Preference) (Comparison, error)
	// ListComparisons returns at most limit comparisons of the owner (of
	// one conversation when conversationID is valid), newest first.
	ListComparisons(ctx context.Context, ownerID string, conversationID uuid.NullUUID, limit int, after *PageCursor) ([]Comparison, error)
	// ReplyTraceContexts returns, by message id, the W3C trace context
	// (traceparent, and tracestate when there is one) that the prompts of
	// the owner's messages keep from the request that sent them; a message
	// with no prompt, one that keeps none, or not the owner's is absent.
	// Ratings and votes are recorded on those traces (docs/operations.md).
	ReplyTraceContexts(ctx context.Context, ownerID string, messageIDs []uuid.UUID) (map[uuid.UUID]map[string]string, error)

	// DeleteResponse deletes the owner's prompt's reply from OpenAI's
	// Responses API (ResponseDeleted reports it from then on); the
	// conversation's messages stay. A prompt still queued or running is
	// cancelled first. NotFound for an unknown prompt, another owner's,
	// or one deleted already.
	DeleteResponse(ctx context.Context, ownerID string, promptID uuid.UUID) error
	// ResponseDeleted reports whether DeleteResponse deleted the prompt's
	// reply. It does not check ownership: callers reach it only for
	// prompts whose ownership they have checked.
	ResponseDeleted(ctx context.Context, promptID uuid.UUID) (bool, error)

	// ConversationMetadata reads the conversation's OpenAI metadata (a JSON
	// object, {} when none was set). It does not check ownership: callers
	// reach it only for conversations whose ownership they have checked.
	ConversationMetadata(ctx context.Context, conversationID uuid.UUID) (json.RawMessage, error)
	// SetConversationMetadata replaces the owner's conversation's OpenAI
	// metadata (a JSON object). NotFound for an unknown conversation or
	// another owner's.
	SetConversationMetadata(ctx context.Context, ownerID string, conversationID uuid.UUID, metadata json.RawMessage) error

	// AppendMessages appends messages that no reply answers (user
	// messages with their files, assistant messages of text) at the
	// conversation's active leaf, in order, in one transaction, and
	// returns their ids. Invalid for a malformed message (naming
	// items[i]), NotFound for a conversation or a file that is not the
	// owner's (items[i]: file_ids[j]), FailedPrecondition while a reply
	// of the conversation is being written; a refusal writes nothing.
	AppendMessages(ctx context.Context, p AppendMessagesParams) ([]uuid.UUID, error)
	// DeleteMessage deletes a message of the conversation's active path,
	// the messages below it hung below its parent instead (its reply's
	// prompt goes with an assistant message). NotFound for an unknown
	// conversation or message, FailedPrecondition for a message off the
	// active path or of a comparison, and while a reply of the
	// conversation is being written.
	DeleteMessage(ctx context.Context, ownerID string, conversationID, messageID uuid.UUID) error

	// PromptInput reads the user message the owner's prompt's reply
	// answers, on the active path or not. NotFound for an unknown prompt
	// or another owner's.
	PromptInput(ctx context.Context, ownerID string, promptID uuid.UUID) (PromptInput, error)

	// Trace returns the prompt named by promptID, or else the one filling
	// messageID, with every event of it in order.
	Trace(ctx context.Context, ownerID string, promptID, messageID uuid.NullUUID) (Trace, error)
	// Search returns at most limit of the owner's messages matching query
	// (web search syntax, as wire.SearchQuery rewrites it), best first. A
	// query with no word to find (stop words, punctuation) finds nothing;
	// one that only excludes words is Invalid; a search that runs past
	// the store's time limit is DeadlineExceeded.
	Search(ctx context.Context, ownerID, query string, limit int) ([]SearchResult, error)

	// AnswerInput answers the owner's pending input request (the first
	// answer wins) and returns it as answered; the request's prompt is
	// queued again once none of its requests is pending. NotFound for an
	// unknown or foreign request; FailedPrecondition, changing nothing,
	// for one answered already, expired or cancelled (the message names
	// which); Invalid for an answer not of the request's kind or shape.
	AnswerInput(ctx context.Context, p AnswerInputParams) (InputRequest, error)
	// AnswerInputs answers several of the owner's pending input requests
	// (one request of a protocol that carries several answers) all or
	// nothing: in one transaction, so that when any answer is refused
	// (each as AnswerInput would), none is recorded and no event is
	// sent. It returns the requests as answered, in ps's order. The
	// error of a refused answer is prefixed with its Field (when set).
	AnswerInputs(ctx context.Context, ps []AnswerInputParams) ([]InputRequest, error)
	// ToolCallInputs returns the input requests of those of the given tool
	// calls that asked for input (ToolCallID, Kind, Status and Answer set),
	// in no order. It does not check ownership: callers pass the calls of a
	// conversation whose ownership they have checked.
	ToolCallInputs(ctx context.Context, toolCallIDs []uuid.UUID) ([]InputRequest, error)
	// ClaimInput claims the owner's pending client_tool request for
	// p.Claimant for p.Lease (whole seconds), when it is unclaimed, its
	// claim lapsed or p.Claimant holds it (a renewal), and returns it as
	// claimed. NotFound as AnswerInput; FailedPrecondition for a request
	// of another kind, not pending, or held by another claimant (named).
	ClaimInput(ctx context.Context, p ClaimInputParams) (InputRequest, error)
}
