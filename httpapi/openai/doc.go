// Package openai serves OpenAI's Responses API (POST /v1/responses, GET
// /v1/responses/{id}, its stream, cancel, delete and input_items) and its
// Conversations API (/v1/conversations: a convo conversation, its items
// the blocks of its active path; items added are messages without a
// reply, items.go, and an item deleted deletes its message from the tree),
// so
// that an OpenAI SDK whose baseURL is convo's /v1 and whose apiKey is a
// convo token writes and reads convo conversations: a response is one
// reply (one prompt), its id "resp_" and the prompt's id. Input images
// and files are files the user's message holds (files.go), and a
// Response's usage is what its worker reported (usage.go).
//
// Every event of a response's stream is made by one fold (reply, in
// fold.go) from the prompt's own events, through wire/view, whether they
// come from the log (a replay, a resume) or live from the hub: the same
// events always fold to the same stream, so a sequence_number names one
// event forever. Compaction keeps what the fold needs (mergedLengths:
// a merged delta is split at its original boundaries again, split.go).
//
// The wire format is OpenAI's, as the Go SDK github.com/openai/openai-go/v3
// (responses package) decodes it; docs/openai.md is convo's reference, the
// mapping and the limits included.
package openai
