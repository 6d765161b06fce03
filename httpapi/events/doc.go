// Package events serves a conversation's native events as Server-Sent
// Events (GET /v1/conversations/{id}/events): the same snapshot and events
// as the Connect API's StreamConversation, each event's data its proto3
// JSON, its SSE event name its kind and its SSE id its seq, so that
// EventSource resumes with Last-Event-ID after a drop.
//
// Server-Sent Events are specified by the WHATWG HTML standard
// (https://html.spec.whatwg.org/multipage/server-sent-events.html);
// docs/protocols.md ("SSE: the native events") is convo's reference.
package events
