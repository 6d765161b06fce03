// Client tools run exactly once across the tabs of a user: a tab that sees
// an open client_tool request for a tool it registered claims the run
// (ClaimInput, claimant = the tab's id) before running it, renews the claim
// at half its lease while the tool runs, and answers with the tool's output
// or its error (AnswerInput). A tab whose claim is refused shows the run as
// going on elsewhere, and tries again when that claim lapses (its tab was
// closed): the request stays open until someone answers it.

import {
  answerInput,
  claimInput,
  Code,
  ConnectError,
  type ConversationState,
  type ConvoClient,
  type InputRequestState,
  type JsonValue,
} from "@convo/client";

/** A client tool: it gets the call's input and returns its output (a string as is, anything else as JSON). */
export type ClientTool = (input: JsonValue | undefined) => unknown;

/**
 * The run of a client tool as this tab sees it: "here" (this tab holds the
 * claim and runs it), "elsewhere" (another tab holds it), "done" (this tab
 * answered with output) or "failed" (this tab answered with error).
 */
export interface ClientToolRun {
  status: "here" | "elsewhere" | "done" | "failed";
  /** The claimant running it, for "elsewhere". */
  claimedBy?: string;
  output?: string;
  error?: string;
}

let tabIdValue: string | undefined;

/** tabId names this page (a browser tab) as a claimant: one id per page load. */
export function tabId(): string {
  tabIdValue ??=
    typeof crypto !== "undefined" && "randomUUID" in crypto
      ? `tab-${crypto.randomUUID()}`
      : `tab-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
  return tabIdValue;
}

export interface ClientToolRunnerOptions {
  client: ConvoClient;
  /** The conversation's latest state. */
  getState: () => ConversationState;
  /** The registered tools, by name (read at each sync). */
  getTools: () => Readonly<Record<string, ClientTool>>;
  /** This tab's claimant id (default tabId()). */
  claimant?: string;
  /** The claim's lease in seconds (default 30); renewed at half of it. */
  leaseSeconds?: number;
  /** The clock (tests). */
  now?: () => number;
}

/** The tool name and input of the tool call a request belongs to. */
function callOf(state: ConversationState, toolCallId: string) {
  for (const b of Object.values(state.blocks)) {
    if (b.toolCall?.id === toolCallId) return b.toolCall;
  }
  return undefined;
}

/**
 * ClientToolRunner runs the client tools of one conversation in this tab,
 * exactly once across tabs (see above). Call sync after each change of the
 * state; subscribe/getSnapshot publish the runs this tab knows of.
 */
export class ClientToolRunner {
  private runs: Record<string, ClientToolRun> = {};
  /** Tool calls this tab started or finished running: never run twice. */
  private started = new Set<string>();
  /** Tool calls this tab is trying to claim. */
  private claiming = new Set<string>();
  private timers = new Map<string, ReturnType<typeof setTimeout>>();
  private listeners = new Set<() => void>();
  private stopped = false;
  readonly claimant: string;
  private readonly lease: number;
  private readonly now: () => number;

  constructor(private readonly o: ClientToolRunnerOptions) {
    this.claimant = o.claimant ?? tabId();
    this.lease = o.leaseSeconds ?? 30;
    this.now = o.now ?? Date.now;
  }

  getSnapshot = (): Readonly<Record<string, ClientToolRun>> => this.runs;
  subscribe = (l: () => void): (() => void) => {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  };

  private set(id: string, run: ClientToolRun) {
    this.runs = { ...this.runs, [id]: run };
    for (const l of this.listeners) l();
  }

  /** sync claims the open client_tool requests of registered tools that no other tab holds. */
  sync = (): void => {
    if (this.stopped) return;
    const state = this.o.getState();
    const tools = this.o.getTools();
    // A run another tab held is over once its request is no longer open.
    const gone = Object.keys(this.runs).filter(
      (id) => this.runs[id].status === "elsewhere" && !state.inputs.some((i) => i.toolCallId === id),
    );
    if (gone.length > 0) {
      const runs = { ...this.runs };
      for (const id of gone) delete runs[id];
      this.runs = runs;
      for (const l of this.listeners) l();
    }
    for (const req of state.inputs) {
      if (req.kind !== "client_tool" || this.started.has(req.toolCallId) || this.claiming.has(req.toolCallId)) continue;
      const call = callOf(state, req.toolCallId);
      const tool = call && tools[call.name];
      if (!call || !tool) continue;
      if (req.claimedBy && req.claimedBy !== this.claimant && (req.claimExpiresAt ?? 0) > this.now()) {
        this.elsewhere(req, req.claimedBy, req.claimExpiresAt);
        continue;
      }
      void this.claimAndRun(req, tool, call.input);
    }
  };

  /** elsewhere shows the run as another tab's and looks again when its claim would lapse. */
  private elsewhere(req: InputRequestState, claimedBy: string, until: number | undefined) {
    const cur = this.runs[req.toolCallId];
    if (cur?.status !== "elsewhere" || cur.claimedBy !== claimedBy) this.set(req.toolCallId, { status: "elsewhere", claimedBy });
    if (this.timers.has(req.toolCallId)) return;
    const wait = Math.max(1000, (until ?? 0) - this.now() + 250);
    this.timers.set(
      req.toolCallId,
      setTimeout(() => {
        this.timers.delete(req.toolCallId);
        this.sync();
      }, wait),
    );
  }

  private async claimAndRun(req: InputRequestState, tool: ClientTool, input: JsonValue | undefined) {
    const id = req.toolCallId;
    this.claiming.add(id);
    try {
      await claimInput(this.o.client, id, this.claimant, this.lease);
    } catch (err) {
      this.claiming.delete(id);
      const e = ConnectError.from(err);
      if (e.code !== Code.FailedPrecondition) {
        // A network error or the like: look again later.
        this.elsewhere(req, "", this.now() + 2000);
        return;
      }
      // Held by another tab, or no longer pending (answered: nothing to do).
      const latest = this.o.getState().inputs.find((i) => i.toolCallId === id);
      const holder = /is claimed by (.+) until/.exec(e.rawMessage)?.[1] ?? latest?.claimedBy ?? "";
      if (latest) this.elsewhere(latest, holder, latest.claimExpiresAt ?? this.now() + this.lease * 1000);
      return;
    }
    if (this.stopped) {
      this.claiming.delete(id);
      return;
    }
    this.started.add(id);
    this.claiming.delete(id);
    this.set(id, { status: "here" });
    const renew = setInterval(() => {
      claimInput(this.o.client, id, this.claimant, this.lease).catch(() => {});
    }, (this.lease * 1000) / 2);
    let answer: { output: string } | { error: string };
    try {
      const out = await tool(input);
      answer = { output: typeof out === "string" ? out : JSON.stringify(out ?? null) };
    } catch (err) {
      answer = { error: (err instanceof Error ? err.message : String(err)) || "the client tool failed" };
    }
    clearInterval(renew);
    try {
      await answerInput(this.o.client, id, { clientTool: answer });
    } catch (err) {
      // Already answered (or expired): the first answer won. Anything
      // else is shown as this tab's failure to hand the result in.
      const e = ConnectError.from(err);
      if (e.code !== Code.FailedPrecondition) answer = { error: `could not hand in the result: ${e.rawMessage}` };
    }
    this.set(id, "output" in answer ? { status: "done", output: answer.output } : { status: "failed", error: answer.error });
  }

  /** start (again) looks for requests: sync after each change of the state. */
  start = (): void => {
    this.stopped = false;
    this.sync();
  };

  /** stop stops looking for requests (a run under way still answers); start resumes. */
  stop = (): void => {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  };
}
