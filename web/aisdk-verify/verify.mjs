// Checks convo's AI SDK UI message streams with the AI SDK's own code (the
// npm package ai, pinned in web/package.json); driven by the Go test
// TestAISDKVerifier (go test ./httpapi/aisdk), which records the streams
// and judges this script's report.
//
//   AISDK_RECORDINGS=dir  every dir/*.sse (a response body as received) is
//                         parsed chunk by chunk against uiMessageChunkSchema,
//                         then read as DefaultChatTransport reads a response
//                         and folded by readUIMessageStream into the
//                         UIMessage that is reported.
//   AISDK_API=url         DefaultChatTransport, pointed at url (POST
//                         /v1/ai-sdk/chat), sends a message in a new chat and
//                         folds the reply; then sends another, drops the
//                         response after its first text, and resumes with
//                         reconnectToStream; then reconnects once more (no
//                         reply running: null).
//   AISDK_CHAT=url        the AI SDK's own chat (AbstractChat, what useChat
//                         wraps) runs against url: two sends, an edit of the
//                         second message, a regenerate, an edit of the first
//                         message, then a reload from /messages and an edit
//                         by convo's id; once with the transport sending the
//                         whole chat, once sending only the last two
//                         messages (docs/protocols.md). After each step the
//                         chat's messages and /messages are reported.
//
// The report is one JSON object on stdout. The script exits non-zero only
// when it cannot run at all; the Go test judges the report.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { AbstractChat, DefaultChatTransport, readUIMessageStream, uiMessageChunkSchema } from "ai";
import { safeValidateTypes } from "@ai-sdk/provider-utils";

/** The data of each SSE event of a body, in order. */
function sseData(body) {
  const out = [];
  for (const block of body.split("\n\n")) {
    const data = block
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, ""));
    if (data.length > 0) out.push(data.join("\n"));
  }
  return out;
}

/** Schema errors of each chunk, as strings naming the chunk's index. */
async function schemaErrors(datas) {
  const errors = [];
  for (const [i, data] of datas.entries()) {
    if (data === "[DONE]") continue;
    let value;
    try {
      value = JSON.parse(data);
    } catch (err) {
      errors.push(`chunk ${i}: not JSON: ${err.message}`);
      continue;
    }
    const res = await safeValidateTypes({ value, schema: uiMessageChunkSchema });
    if (!res.success) errors.push(`chunk ${i} (${value?.type}): ${res.error.message}`);
  }
  return errors;
}

/** fold reads a chunk stream into its last UIMessage, as useChat's reader does. */
async function fold(chunks, initial) {
  let message = initial ?? null;
  const errors = [];
  for await (const m of readUIMessageStream({ message: initial, stream: chunks, onError: (e) => errors.push(String(e?.message ?? e)) })) {
    message = m;
  }
  return { message: message && JSON.parse(JSON.stringify(message)), streamErrors: errors };
}

/** A transport whose processResponseStream is the one DefaultChatTransport uses on a response body. */
const transport = new DefaultChatTransport();

async function checkRecording(file) {
  const body = readFileSync(file, "utf8");
  const datas = sseData(body);
  const report = { file, chunks: datas.length, schemaErrors: await schemaErrors(datas), readError: null, message: null, streamErrors: [] };
  try {
    const bytes = new Response(body).body;
    // <name>.message.json, when present, is the UIMessage the client held
    // before the stream (a reply resumed after an answer continues it).
    const initialFile = file.replace(/\.sse$/, ".message.json");
    const initial = existsSync(initialFile) ? JSON.parse(readFileSync(initialFile, "utf8")) : undefined;
    Object.assign(report, await fold(transport.processResponseStream(bytes), initial));
  } catch (err) {
    report.readError = String(err?.message ?? err);
  }
  return report;
}

async function transportRuns(api) {
  const t = new DefaultChatTransport({ api });
  const chatId = randomUUID();
  const user = (text) => ({ id: randomUUID(), role: "user", parts: [{ type: "text", text }] });
  const out = { chatId, complete: null, resumed: null, idleReconnect: "not run", error: null };
  try {
    const first = [user("What is 6 times 7?")];
    const stream = await t.sendMessages({ chatId, messages: first, trigger: "submit-message", messageId: undefined, abortSignal: undefined });
    out.complete = await fold(stream);

    // The second reply: drop the response after its first text, then resume.
    const second = [...first, out.complete.message, user("And 7 times 8?")];
    const abort = new AbortController();
    const dropped = await t.sendMessages({ chatId, messages: second, trigger: "submit-message", messageId: undefined, abortSignal: abort.signal });
    const reader = dropped.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done || value.type === "text-delta") break;
    }
    abort.abort();
    await reader.cancel().catch(() => {});
    const resumed = await t.reconnectToStream({ chatId });
    out.resumed = resumed ? await fold(resumed) : { message: null, streamErrors: ["reconnectToStream returned null while the reply ran"] };

    const idle = await t.reconnectToStream({ chatId });
    out.idleReconnect = idle === null ? "null" : "a stream";
  } catch (err) {
    out.error = String(err?.stack ?? err);
  }
  return out;
}

/** A chat whose state is plain memory: what useChat is, without React. */
class MemoryChat extends AbstractChat {
  constructor({ messages = [], ...init }) {
    const state = {
      status: "ready",
      error: undefined,
      messages,
      pushMessage(m) {
        this.messages = this.messages.concat(m);
      },
      popMessage() {
        this.messages = this.messages.slice(0, -1);
      },
      replaceMessage(i, m) {
        this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
      },
      snapshot: (v) => structuredClone(v),
    };
    super({ ...init, state });
  }
}

/** chatRuns edits and regenerates through the AI SDK's chat, as a page's
 * useChat does, and reports the chat and /messages after every step. */
async function chatRuns(api, trim) {
  const id = randomUUID();
  const transport = () =>
    new DefaultChatTransport({
      api,
      prepareSendMessagesRequest: trim
        ? ({ id, messages, trigger, messageId }) => ({ body: { id, messages: messages.slice(-2), trigger, messageId } })
        : undefined,
    });
  const errors = [];
  const out = { chatId: id, steps: [], error: null };
  try {
    let chat = new MemoryChat({ id, transport: transport(), onError: (e) => errors.push(String(e?.message ?? e)) });
    const step = async (name, action) => {
      errors.length = 0;
      await action();
      const res = await fetch(`${api}/${id}/messages`);
      out.steps.push({
        name,
        status: chat.status,
        errors: [...errors],
        messages: JSON.parse(JSON.stringify(chat.messages)),
        loaded: res.ok ? await res.json() : `GET /messages: ${res.status}`,
      });
    };
    await step("send", () => chat.sendMessage({ text: "What is 6 times 7?" }));
    await step("send again", () => chat.sendMessage({ text: "And 7 times 8?" }));
    await step("edit the second message", () => chat.sendMessage({ text: "And 8 times 9?", messageId: chat.messages[2].id }));
    await step("regenerate", () => chat.regenerate());
    await step("edit the first message", () => chat.sendMessage({ text: "What is 2 times 3?", messageId: chat.messages[0].id }));
    await step("send after the edits", () => chat.sendMessage({ text: "And 3 times 4?" }));
    await step("reload, edit by convo's id", async () => {
      const res = await fetch(`${api}/${id}/messages`);
      chat = new MemoryChat({ id, transport: transport(), messages: await res.json(), onError: (e) => errors.push(String(e?.message ?? e)) });
      await chat.sendMessage({ text: "And 4 times 5?", messageId: chat.messages[2].id });
    });
  } catch (err) {
    out.error = String(err?.stack ?? err);
  }
  return out;
}

const report = { recordings: [], transport: null, chats: null };
const dir = process.env.AISDK_RECORDINGS;
if (dir) {
  for (const name of readdirSync(dir).filter((n) => n.endsWith(".sse")).sort()) {
    report.recordings.push(await checkRecording(join(dir, name)));
  }
}
if (process.env.AISDK_API) {
  report.transport = await transportRuns(process.env.AISDK_API);
}
if (process.env.AISDK_CHAT) {
  report.chats = {
    whole: await chatRuns(process.env.AISDK_CHAT, false),
    lastTwo: await chatRuns(process.env.AISDK_CHAT, true),
  };
}
process.stdout.write(JSON.stringify(report) + "\n");
