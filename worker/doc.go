// Package worker is convo's Go worker runtime: it runs prompts with a
// model and writes the replies through the SQL worker API (the convo.*
// functions of db/functions/worker_api.sql), exactly as a worker in any
// other language would, one function call per transaction.
//
// A Pool of workers waits on LISTEN convo_prompts (polling slowly as a
// safety net), claims a prompt with convo.claim_prompt, heartbeats its
// lease while it works, streams the model's output into blocks, runs the
// tools the model calls, and completes or fails the prompt. A cancelled
// prompt (a "cancelled:<id>" notification, or a heartbeat that answers
// false) stops the model at once, and the worker writes nothing more.
//
// Models speak a typed streaming API (Event: Part, Flush, Finish; Chunk:
// MessageChunk, ReasoningChunk, StructuredChunk, ToolCallStart,
// ToolCallArgs), separate from the persisted blocks; the runtime
// translates it and coalesces deltas so that a fast model does not cost
// one commit per token. The built-in demo model needs no network; the
// OpenAI-compatible client talks to OpenAI, Ollama, vLLM or llama.cpp.
//
// docs/workers.md describes the runtime; Start, Run and Settings are the
// entry points for cmd/api and cmd/worker.
package worker
