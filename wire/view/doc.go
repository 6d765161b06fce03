// Package view is convo's one fold of a conversation's stream, which every
// protocol the server speaks besides the Connect API's own events
// serializes from: AG-UI (httpapi/agui), the AI SDK's UI messages
// (httpapi/aisdk) and the history export (httpapi/history).
//
// A Conversation starts from a snapshot (or a stored State) and takes the
// stream's events in order. Apply folds an event in and returns the
// typed Changes it made: a block started, text appended to it, a tool
// call ended, a prompt waiting, the active path switched. Each Change
// names the prompt it belongs to, resolved once here (a tool call's
// events name only their block), so a protocol routes changes to its runs
// or replies without keeping its own maps. Replay turns a message as it
// stands into the Changes that would have built it, for a client that
// joins while the message is being written.
//
// Kind is the one table of block types: what a block is, whatever
// protocol shows it. A new block type gets its Kind here, and each
// protocol then says how it shows that Kind.
//
// A Conversation is not safe for concurrent use. Per delta the work is
// O(1) in the block's length.
package view
