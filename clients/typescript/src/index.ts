// @convo/client: a TypeScript client of convo, for browsers and Node. It
// holds the generated Connect client and messages, the pure fold of a
// conversation's stream into its state, followConversation (the stream,
// reconnected and resumed by itself), loadOlder (the messages a
// bounded snapshot left out), the open input requests of pauses
// (state.inputs, answerInput, claimInput), files (uploadFile, a file
// block's file with its signed url), and helpers for every call an app
// makes. It depends on no UI library. docs/client.md is its guide.

export { create, fromJson, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
export { Code, ConnectError } from "@connectrpc/connect";
export * from "./client.js";
export * from "./files.js";
export * from "./fold.js";
export * from "./follow.js";
export * from "./older.js";
export * from "./presence.js";
export * from "./shared.js";
export * from "./state.js";
export * from "./gen/convo/v1/conversation_service_pb.js";
export * from "./gen/convo/v1/events_pb.js";
export * from "./gen/convo/v1/types_pb.js";
export * from "./text.js";
