// Package history serves the history export of a conversation (GET
// /v1/conversations/{id}/history): the conversation as it stands at one
// seq, one entry per message with its text and, for a message with more
// than text, its reply's events, coalesced (each run of adjacent deltas of
// a text or reasoning block merged into one).
//
// The format is convo's own: the entries' events are the Connect API's
// (proto3 JSON of convo.v1.Event), a vocabulary the document names in its
// contentType. docs/protocols.md ("History export") is its reference.
package history
