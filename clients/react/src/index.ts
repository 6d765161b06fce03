// @convo/react: React hooks over @convo/client. ConvoProvider holds the
// client; useConversation follows one conversation (one stream, at most
// one render per animation frame; its pauses, and client tools run
// exactly once across tabs: ClientToolRunner); useConversationList lists the user's
// conversations without holding a stream; useUploads holds a composer's
// uploads in flight. docs/client.md is the guide.

export * from "./clientTools.js";
export * from "./provider.js";
export * from "./store.js";
export * from "./uploads.js";
export * from "./useConversation.js";
export * from "./useConversationList.js";
