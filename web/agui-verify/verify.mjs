// Checks convo's AG-UI streams with the official AG-UI packages; driven by
// the Go test TestAGUIVerifier (go test ./httpapi/agui), which records
// the streams and reads this script's report.
//
//   AGUI_RECORDINGS=dir  every dir/*.jsonl (one AG-UI event per line) is
//                        parsed with @ag-ui/core's zod schemas, run through
//                        @ag-ui/client's verifyEvents, and applied by the
//                        client's own pipeline (an agent replaying it), whose
//                        resulting messages are reported.
//   AGUI_URL=url         HttpAgent runs two turns of one new thread against
//                        url (POST /v1/agui), with AGUI_TOKEN as its bearer
//                        token when set; its events and messages are reported.
//
// The report is one JSON object on stdout. The script exits non-zero only
// when it cannot run at all; the Go test judges the report.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { AbstractAgent, HttpAgent, verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { from, lastValueFrom, toArray } from "rxjs";

// The client logs its own warnings; they go to stderr, not the report.
console.warn = (...args) => process.stderr.write(args.join(" ") + "\n");

/** Schema errors of each event, as strings naming the event's index. */
function schemaErrors(events) {
  const errors = [];
  events.forEach((event, i) => {
    const res = EventSchemas.safeParse(event);
    if (!res.success) {
      errors.push(`event ${i} (${event?.type}): ${res.error.message}`);
    }
  });
  return errors;
}

/** The verifier's verdict on a whole stream: null when it passes. */
async function verifierError(events) {
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(), toArray()));
    return null;
  } catch (err) {
    return String(err?.message ?? err);
  }
}

/** An agent whose run replays recorded events, so that the client's own
 * pipeline (enforcement, verification, reducer) applies them. */
class ReplayAgent extends AbstractAgent {
  constructor(events) {
    super({ threadId: "replay" });
    this.events = events;
  }
  run() {
    return from(this.events);
  }
}

async function checkRecording(file) {
  const events = readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line));
  const report = {
    file,
    events: events.length,
    schemaErrors: schemaErrors(events),
    verifyError: await verifierError(events),
    messages: null,
    applyError: null,
  };
  const agent = new ReplayAgent(events);
  try {
    await agent.runAgent();
    report.messages = agent.messages;
  } catch (err) {
    report.applyError = String(err?.message ?? err);
  }
  return report;
}

async function httpAgentRuns(url, token) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const agent = new HttpAgent({ url, headers, threadId: randomUUID() });
  const turns = ["What is 6 times 7?", "And what is 7 times 8?"];
  const runs = [];
  for (const text of turns) {
    agent.addMessage({ id: randomUUID(), role: "user", content: text });
    const events = [];
    const run = { text, events, schemaErrors: [], error: null, messages: null };
    try {
      await agent.runAgent(
        { runId: randomUUID(), forwardedProps: { model: { provider: "demo" } } },
        { onEvent: ({ event }) => void events.push(event) },
      );
    } catch (err) {
      run.error = String(err?.message ?? err);
    }
    run.schemaErrors = schemaErrors(events);
    run.messages = structuredClone(agent.messages);
    runs.push(run);
  }
  return { threadId: agent.threadId, runs };
}

const report = { recordings: [], httpAgent: null };
const dir = process.env.AGUI_RECORDINGS;
if (dir) {
  for (const name of readdirSync(dir).filter((n) => n.endsWith(".jsonl")).sort()) {
    report.recordings.push(await checkRecording(join(dir, name)));
  }
}
if (process.env.AGUI_URL) {
  report.httpAgent = await httpAgentRuns(process.env.AGUI_URL, process.env.AGUI_TOKEN);
}
process.stdout.write(JSON.stringify(report) + "\n");
