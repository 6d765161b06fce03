// Package conversation is convo's domain: the nouns of a conversation
// (Conversation, Message, Prompt, Block, ToolCall, Event), the Store that
// persists them, and the error codes every layer speaks. It imports no
// infrastructure; package postgres implements Store, package stream fans
// events out, and package connectapi serves them.
package conversation
