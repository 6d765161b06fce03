// The TypeScript runtime's runner of the worker conformance suite
// (conformance/README.md, "Runners"): @convo/worker with the suite's
// scripted model and its tools echo and guarded_echo, on the AI SDK path
// a user takes. Each prompt runs streamText with a MockLanguageModelV4
// (ai/test) that plays the script in the last user message of its
// prompt, round n when the prompt holds n assistant turns after that
// message; the AI SDK runs the echo tool and calls the model again; and
// writeStreamText writes the stream into the reply. guarded_echo is an AI
// SDK tool with needsApproval: writeStreamText parks the prompt on its
// approval request, and the claim that resumes it gives streamText the
// answer (modelMessagesOf), so the AI SDK runs the approved tool or
// reports the denial, and the model plays the round after the pause. It imports
// @convo/worker and ai as an installed user would:
// scripts/sdk-setup-typescript.sh installs both into a scratch project
// and runs this file there.
//
// One limit of the AI SDK path: its streams have text and reasoning parts,
// not structured ones, so a script's json steps are written as structured
// blocks (writeStreamText's textAs) only in a script without text steps.
//
// Settings come from the contract's variables, all required. It prints
// "ready" once it claims prompts; on SIGTERM (or SIGINT) it stops
// claiming, lets the replies in flight run for CONVO_DRAIN_TIMEOUT_MS,
// fails the rest ("… (shutting down)") and exits 0.

import { Worker } from "@convo/worker";
import { modelMessagesOf, writeStreamText } from "@convo/worker/ai-sdk";
import { jsonSchema, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";

/** The contract's variables; a missing or malformed one stops the runner, named. */
function readSettings(env) {
  const str = (name) => {
    const v = env[name];
    if (!v) throw new Error(`${name} is required (see conformance/README.md, Runners)`);
    return v;
  };
  const num = (name, least) => {
    const v = str(name);
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < least) throw new Error(`${name}: want a whole number of ${least} or more, got ${JSON.stringify(v)}`);
    return n;
  };
  return {
    databaseURL: str("DATABASE_URL"),
    workerId: str("CONVO_WORKER_ID"),
    slots: num("CONVO_WORKER_SLOTS", 1),
    leaseSeconds: num("CONVO_LEASE_SECONDS", 1),
    batchIntervalMs: num("CONVO_BATCH_INTERVAL_MS", 1),
    drainTimeoutMs: num("CONVO_DRAIN_TIMEOUT_MS", 0),
  };
}

// ---- the script

const stepKinds = ["text", "reasoning", "json", "toolCall", "sleepMs", "hang", "error", "attachments"];

/**
 * Parses a user's message as a script, refusing what is not one and
 * naming where: unknown fields, steps that are not exactly one known kind,
 * values of the wrong type.
 */
function parseScript(text) {
  let s;
  try {
    s = JSON.parse(text);
  } catch (err) {
    throw new Error(`the user's message is not a conformance script: ${err.message}`);
  }
  if (typeof s !== "object" || s === null || Array.isArray(s)) throw new Error("the user's message is not a conformance script: want a JSON object");
  for (const k of Object.keys(s)) if (k !== "rounds") throw new Error(`conformance script: unknown field ${JSON.stringify(k)}`);
  if (!Array.isArray(s.rounds) || s.rounds.length === 0) throw new Error("conformance script: rounds must be a non-empty array of rounds");
  s.rounds.forEach((round, r) => {
    if (!Array.isArray(round)) throw new Error(`conformance script: rounds[${r}] must be an array of steps`);
    round.forEach((st, i) => {
      const where = `conformance script: rounds[${r}][${i}]`;
      const keys = typeof st === "object" && st !== null && !Array.isArray(st) ? Object.keys(st) : [];
      if (keys.length !== 1 || !stepKinds.includes(keys[0])) {
        throw new Error(`${where}: want exactly one of ${stepKinds.join(", ")}; got ${JSON.stringify(st)}`);
      }
      const v = st[keys[0]];
      switch (keys[0]) {
        case "text":
        case "reasoning":
        case "json":
        case "error":
          if (typeof v !== "string") throw new Error(`${where}.${keys[0]}: want a string`);
          break;
        case "toolCall":
          if (typeof v?.id !== "string" || v.id === "" || typeof v.name !== "string" || v.name === "" || typeof v.input !== "object" || v.input === null || Array.isArray(v.input)) {
            throw new Error(`${where}.toolCall: want an id, a name and an input object`);
          }
          break;
        case "sleepMs":
          if (!Number.isInteger(v) || v < 0) throw new Error(`${where}.sleepMs: want a whole number of 0 or more, got ${JSON.stringify(v)}`);
          break;
        case "hang":
        case "attachments":
          if (v !== true) throw new Error(`${where}.${keys[0]}: want true`);
          break;
      }
    });
  });
  return s;
}

/**
 * The text of the last user message of an AI SDK prompt (what the model
 * is given), and the round to play: the assistant turns after it.
 */
function scriptAndRound(prompt) {
  let round = 0;
  for (let i = prompt.length - 1; i >= 0; i--) {
    const m = prompt[i];
    if (m.role === "assistant") round++;
    if (m.role !== "user") continue;
    const text = typeof m.content === "string" ? m.content : m.content.filter((p) => p.type === "text").map((p) => p.text).join("");
    const files = typeof m.content === "string" ? [] : m.content.filter((p) => p.type === "file");
    return { script: parseScript(text), round, files };
  }
  throw new Error("conformance script: the prompt has no user message");
}

// ---- the scripted model

const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};

/**
 * The scripted model: each call reads the script from the last user
 * message of its prompt and streams round n, n the assistant turns after
 * that message, as the AI SDK's language model parts. The round comes from
 * the prompt, not from a count of calls, so a prompt resumed after a
 * pause (by any worker) plays the round after it. json steps stream as
 * text parts, which the handler writes as structured blocks (see the
 * file's comment).
 */
function scriptedModel() {
  return new MockLanguageModelV4({
    provider: "conformance",
    modelId: "scripted",
    doStream: async ({ prompt, abortSignal }) => {
      const { script, round: n, files } = scriptAndRound(prompt);
      if (n >= script.rounds.length) throw new Error(`conformance script: the model was called for round ${n}, the script has ${script.rounds.length}`);
      const stream = new ReadableStream({
        start(c) {
          // Not awaited: the parts flow while the round plays.
          play(script.rounds[n], c, abortSignal, files).then(
            () => c.close(),
            (err) => c.error(err),
          );
        },
      });
      return { stream };
    },
  });
}

/**
 * Streams one round into c: consecutive pieces of one kind share a part
 * (a block); another kind, or a tool call, ends it. sleepMs and hang stop
 * when the call is aborted (the prompt cancelled, its lease lost, the
 * worker stopping), as a model's request does; error ends the round with
 * an error part.
 */
async function play(round, c, signal, files) {
  let open; // { part: "text" | "reasoning", kind, id }
  let parts = 0;
  let toolCalls = false;
  const close = () => {
    if (open) c.enqueue({ type: `${open.part}-end`, id: open.id });
    open = undefined;
  };
  const piece = (part, kind, delta) => {
    if (open?.kind !== kind) {
      close();
      open = { part, kind, id: `${part}-${parts++}` };
      c.enqueue({ type: `${part}-start`, id: open.id });
    }
    c.enqueue({ type: `${part}-delta`, id: open.id, delta });
  };
  c.enqueue({ type: "stream-start", warnings: [] });
  for (const st of round) {
    if ("text" in st) piece("text", "text", st.text);
    else if ("attachments" in st) piece("text", "text", acknowledge(files));
    else if ("json" in st) piece("text", "json", st.json);
    else if ("reasoning" in st) piece("reasoning", "reasoning", st.reasoning);
    else if ("toolCall" in st) {
      close();
      toolCalls = true;
      const { id, name, input } = st.toolCall;
      const args = JSON.stringify(input);
      c.enqueue({ type: "tool-input-start", id, toolName: name });
      c.enqueue({ type: "tool-input-delta", id, delta: args });
      c.enqueue({ type: "tool-input-end", id });
      c.enqueue({ type: "tool-call", toolCallId: id, toolName: name, input: args });
    } else if ("sleepMs" in st) await sleep(st.sleepMs, signal);
    else if ("hang" in st) await sleep(Infinity, signal);
    else if ("error" in st) {
      // A provider reports a failure mid-stream as an error part; the
      // stream breaks there. (Erroring the stream itself would drop the
      // parts not read yet.)
      c.enqueue({ type: "error", error: new Error(st.error) });
      return;
    }
  }
  close();
  c.enqueue({ type: "finish", finishReason: { unified: toolCalls ? "tool-calls" : "stop", raw: undefined }, usage });
}

/**
 * The attachments step's text, as every runner writes it: for each file
 * part of the user's message, in order, "You attached <filename> (<media
 * type without parameters>, <size> bytes)", then for a text/* file `; its
 * first line: "<line>"` (its bytes up to the first newline, within the
 * first 64 KiB), then "."; the lines joined by newlines. The bytes come
 * as the AI SDK hands them to the model: {type: "data", data}, a
 * Uint8Array or base64 text (or {type: "text", text}).
 */
function acknowledge(files) {
  return files
    .map((f) => {
      const bytes =
        f.data?.type === "text"
          ? Buffer.from(f.data.text, "utf8")
          : typeof f.data?.data === "string"
            ? Buffer.from(f.data.data, "base64")
            : Buffer.from(f.data?.data ?? []);
      const type = f.mediaType.split(";")[0].trim();
      let line = `You attached ${f.filename} (${type}, ${bytes.length} bytes)`;
      if (type.startsWith("text/")) {
        const head = bytes.subarray(0, 64 << 10);
        const nl = head.indexOf(10);
        line += `; its first line: "${head.subarray(0, nl < 0 ? head.length : nl).toString("utf8").replace(/\r$/, "")}"`;
      }
      return `${line}.`;
    })
    .join("\n");
}

/** Resolves after ms (never, for Infinity); rejects with the signal's reason when it fires. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = Number.isFinite(ms) ? setTimeout(done, ms) : undefined;
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    function done() {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

const echoInput = jsonSchema({ type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false });

/** The suite's tool: returns its input's text. */
const echo = tool({
  description: "Returns its input's text.",
  inputSchema: echoInput,
  execute: async ({ text }) => text,
});

/** echo once the user approves the call: the prompt waits for the approval. */
const guardedEcho = tool({
  description: "Returns its input's text, once the user approves.",
  inputSchema: echoInput,
  needsApproval: true,
  execute: async ({ text }) => text,
});

/** Runs one prompt the way an AI SDK route would, writing into the reply instead of an HTTP response. */
async function handle(job) {
  const last = [...job.history].reverse().find((m) => m.role === "user");
  const script = parseScript(last?.text ?? "");
  const steps = script.rounds.flat();
  const textAs = steps.some((st) => "json" in st) && !steps.some((st) => "text" in st) ? "structured" : "text";
  const result = streamText({
    model: scriptedModel(),
    // The history, and for a resumed prompt its reply so far with the
    // user's answer.
    messages: modelMessagesOf(job),
    tools: { echo, guarded_echo: guardedEcho },
    // Every round but the last ends with tool calls; one step more lets a
    // script that asks for too many rounds fail with the model's error.
    stopWhen: stepCountIs(script.rounds.length + 1),
    maxRetries: 0,
    abortSignal: job.signal,
    // The error reaches the prompt through the stream's error part; the
    // default would also print it.
    onError: () => {},
  });
  await writeStreamText(job, result, { textAs });
}

// ---- the process

async function main() {
  const s = readSettings(process.env);
  const log = (level) => (message, fields) => console.error(`${new Date().toISOString()} ${level} ${message}${fields ? ` ${JSON.stringify(fields)}` : ""}`);
  const worker = new Worker({
    connectionString: s.databaseURL,
    workerId: s.workerId,
    slots: s.slots,
    leaseSeconds: s.leaseSeconds,
    batchIntervalMs: s.batchIntervalMs,
    logger: { debug() {}, info: log("INFO"), warn: log("WARN"), error: log("ERROR") },
    handler: handle,
  });
  // Signals are caught before the worker starts, so that a SIGTERM sent
  // right after "ready" drains rather than kills.
  const drained = worker.drainOnSignal(s.drainTimeoutMs);
  await worker.start();
  console.log("ready");
  const sig = await drained;
  console.error(`${new Date().toISOString()} INFO drained after ${sig}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`convo typescript runner: ${err?.stack ?? err}`);
    process.exit(1);
  },
);
