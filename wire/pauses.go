package wire

import (
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
)

// The events of pauses (input_requested, input_answered, input_claimed,
// prompt_waiting) are sent only to clients that ask for them
// (StreamConversationRequest.include_pause_events, and each protocol's
// equivalent): the stream's shape never changes for a client that does
// not ask. Such a client gets, in place of each, a messageUpdated of the
// same seq carrying the reply's message as the event has it, so that no
// seq is missing from its stream.

// pauseMessage returns the reply's message that the event of a pause
// carries, and whether e is one.
func pauseMessage(e *convov1.Event) (*convov1.Message, bool) {
	switch k := e.GetKind().(type) {
	case *convov1.Event_InputRequested:
		return k.InputRequested.GetMessage(), true
	case *convov1.Event_InputAnswered:
		return k.InputAnswered.GetMessage(), true
	case *convov1.Event_InputClaimed:
		return k.InputClaimed.GetMessage(), true
	case *convov1.Event_PromptWaiting:
		return k.PromptWaiting.GetMessage(), true
	}
	return nil, false
}

// IsPauseEvent reports whether r is an event of a pause.
func IsPauseEvent(r *Response) bool {
	_, ok := pauseMessage(r.GetEvent())
	return ok
}

// WithoutPauseEvents returns what a client that did not ask for the
// events of pauses gets for r: r itself, or for an event of a pause a
// messageUpdated of the same seq (see above).
func WithoutPauseEvents(r *Response) *Response {
	e := r.GetEvent()
	message, ok := pauseMessage(e)
	if !ok {
		return r
	}
	return &Response{Kind: &convov1.StreamConversationResponse_Event{Event: &convov1.Event{
		Seq: e.GetSeq(), CreatedAt: e.GetCreatedAt(), Replay: e.GetReplay(),
		Kind: &convov1.Event_MessageUpdated{MessageUpdated: &convov1.MessageUpdated{Message: message}},
	}}}
}
