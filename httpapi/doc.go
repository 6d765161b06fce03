// Package httpapi serves convo's open protocols over plain HTTP, as
// adapters over the same stream hub and event log as the Connect API.
// NewHandler is the mux of every route under /v1/; each protocol is its own
// package, its mapping of convo's events in one place:
//
//   - GET /v1/conversations/{id}/events: the native events as Server-Sent
//     Events, resumable with Last-Event-ID (package events);
//   - POST /v1/agui and GET /v1/conversations/{id}/agui: the AG-UI protocol,
//     so that any AG-UI client can use convo as its agent (package agui);
//   - GET /v1/conversations/{id}/history: the conversation as history
//     entries with coalesced events (package history);
//   - POST /v1/ai-sdk/chat and GET /v1/ai-sdk/chat/{id}/stream, /messages,
//     POST /v1/ai-sdk/chat/{id}/stop: the AI SDK's UI message stream
//     protocol (v1), so that useChat with DefaultChatTransport can use
//     convo, resumable streams included (package aisdk).
//   - POST /v1/files, GET /v1/files/{id} and /v1/files/{id}/content:
//     files, uploaded as multipart forms and read back by id or through a
//     signed URL (package files; mounted when Options.Files is set).
//   - GET /v1/shares/{token} and /v1/shares/{token}/events: what a share
//     link shows, as JSON and as Server-Sent Events, with the token alone
//     (package shares).
//
// What the protocols share is in internal/httpx: authentication (requests
// authenticate as the Connect API's do, with a bearer token, or the
// access_token query parameter for EventSource), the JSON body check of
// state-changing routes, error answers and the SSE writer. The tests'
// fixture is internal/apitest. docs/protocols.md is the reference.
package httpapi
