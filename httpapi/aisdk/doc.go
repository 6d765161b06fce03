// Package aisdk serves the AI SDK's UI message stream protocol, v1 (POST
// /v1/ai-sdk/chat, GET /v1/ai-sdk/chat/{id}/stream and /messages, POST
// /v1/ai-sdk/chat/{id}/stop), so that useChat with DefaultChatTransport
// can use convo as its backend, resumable streams included: a conversation
// is a chat, and each reply's blocks become the parts of its UIMessage
// (uiReply in reply.go; uiMessages in messages.go for a whole chat).
//
// The protocol is documented at
// https://ai-sdk.dev/docs/ai-sdk-ui/stream-protocol and defined by the npm
// package ai (uiMessageChunkSchema; convo is checked against the version
// types.go names). docs/protocols.md ("AI SDK (useChat)") is convo's
// reference, the mapping included.
package aisdk
