// Package worker is convo's Go worker runtime: it runs prompts with a
// model and writes the replies through the SQL worker API (the convo.*
// functions of db/functions/worker_*.sql), exactly as a worker in any
// other language would, one function call per transaction.
//
// A Pool of workers waits on LISTEN convo_prompts (polling slowly as a
// safety net), claims prompts with convo.claim_prompts under the
// process's one lease (convo.worker_heartbeat, one heartbeat per process
// however many prompts run), streams the model's output into blocks, runs
// the tools the model calls, and completes or fails the prompt. A
// cancelled prompt (a "cancelled:<id>" notification, or a batch that
// refuses its writes) stops the model at once, and the worker writes
// nothing more; so does every prompt of a process whose lease ran out.
//
// Models speak a typed streaming API (Event: Part, Flush, Finish; Chunk:
// MessageChunk, ReasoningChunk, StructuredChunk, ToolCallStart,
// ToolCallArgs), separate from the persisted blocks; the runtime
// translates it and coalesces deltas so that a fast model does not cost
// one commit per token. Tools are Go functions whose arguments are
// validated against their JSON schema (draft 2020-12) before they run.
//
// A tool call can pause its prompt until a person answers (docs/workers.md,
// "Pauses"): a tool that needs approval (Tool.NeedsApproval,
// Tool.NeedsApprovalFor), a client tool (a Tool without Run, which the
// browser runs) or the built-in ask_user (AskUser). The worker records the
// call with its input request and parks the prompt (convo.wait_prompt) in
// one batch, then lets it go: a waiting prompt holds no worker, slot,
// lease or connection. The answer queues it again; the worker that claims
// it acts on the answers (runs an approved call, fails a denied one with
// the reason, completes or fails a client tool's or question's call),
// gives the model the reply so far with those results, and continues the
// reply in the same message.
//
// The runtime imports no model: a Config is given its Models. The
// built-in ones live in their own packages, by what they depend on:
// worker/demo (the demo model and its tools, no network), worker/openai
// (OpenAI-compatible servers, over plain HTTP), and worker/builtin,
// which chooses them from Settings for cmd/api and cmd/worker.
//
// docs/workers.md describes the runtime; Start, Run and Settings are the
// entry points for cmd/api and cmd/worker.
package worker
