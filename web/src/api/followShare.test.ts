import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  Code,
  ConnectError,
  GetSharedConversationResponseSchema,
  StreamSharedConversationResponseSchema,
  type GetSharedConversationResponse,
} from "@convo/client";
import { followShare, type ShareReader } from "./followShare";

const state = (mode: string, title: string) =>
  create(GetSharedConversationResponseSchema, { share: { id: "s1", mode }, conversation: { id: "c1", title } });

/** A stream step: a state to send, or an error that ends the stream. */
type Step = GetSharedConversationResponse | ConnectError;

/**
 * reader answers GetSharedConversation with first, and each
 * StreamSharedConversation with the next script: its steps in order, then
 * the end of the stream (or, when the scripts ran out, a stream that
 * stays open until aborted).
 */
function reader(first: GetSharedConversationResponse | ConnectError, scripts: Step[][]) {
  const calls = { get: 0, stream: 0 };
  const client = {
    getSharedConversation: async () => {
      calls.get++;
      if (first instanceof ConnectError) throw first;
      return first;
    },
    streamSharedConversation: (_req: unknown, opts?: { signal?: AbortSignal }) => {
      const script = scripts[calls.stream++];
      return (async function* () {
        if (!script) {
          await new Promise((_, reject) =>
            opts?.signal?.addEventListener("abort", () => reject(new ConnectError("aborted", Code.Canceled))),
          );
          return;
        }
        for (const step of script) {
          if (step instanceof ConnectError) throw step;
          yield create(StreamSharedConversationResponseSchema, { state: step });
        }
      })();
    },
  };
  return { client: client as unknown as ShareReader, calls };
}

/** run follows until done() says so; it returns what followShare reported. */
async function run(client: ShareReader, done: (titles: string[], gone: number) => boolean) {
  const titles: string[] = [];
  let gone = 0;
  const statuses: string[] = [];
  let stop = () => {};
  let timer: ReturnType<typeof setTimeout> | undefined;
  await new Promise<void>((resolve, reject) => {
    const check = () => done(titles, gone) && resolve();
    timer = setTimeout(() => reject(new Error(`timed out: ${titles.join(",")} gone=${gone}`)), 5_000);
    stop = followShare({
      client,
      token: "tok",
      initialBackoffMs: 1,
      maxBackoffMs: 2,
      onState: (s) => {
        titles.push(s.conversation?.title ?? "");
        check();
      },
      onGone: () => {
        gone++;
        check();
      },
      onStatus: (s) => statuses.push(s),
    });
  }).finally(() => {
    clearTimeout(timer);
    stop();
  });
  return { titles, gone, statuses };
}

describe("followShare", () => {
  it("a snapshot share is read once: no stream", async () => {
    const { client, calls } = reader(state("snapshot", "Frozen"), []);
    const got = await run(client, (t) => t.length === 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(got.titles).toEqual(["Frozen"]);
    expect(calls).toEqual({ get: 1, stream: 0 });
  });

  it("a live share: the read, then every state of the stream in order", async () => {
    const { client } = reader(state("live", "One"), [[state("live", "One"), state("live", "Two"), state("live", "Three")]]);
    const got = await run(client, (t) => t.length === 4);
    expect(got.titles).toEqual(["One", "One", "Two", "Three"]);
    expect(got.statuses[0]).toBe("connecting");
    expect(got.statuses).toContain("live");
  });

  it("a dropped stream is opened again; the next one's first state brings what was missed", async () => {
    const { client, calls } = reader(state("live", "One"), [
      [state("live", "Two"), new ConnectError("gone away", Code.Unavailable)],
      [],
      [state("live", "Four")],
    ]);
    const got = await run(client, (t) => t.includes("Four"));
    expect(got.titles).toEqual(["One", "Two", "Four"]);
    expect(calls.get).toBe(1);
    expect(calls.stream).toBeGreaterThanOrEqual(3);
    expect(got.statuses).toContain("reconnecting");
  });

  it("revoked while read (not_found): gone, once, and nothing more", async () => {
    const { client, calls } = reader(state("live", "One"), [
      [state("live", "Two"), new ConnectError("share does not exist", Code.NotFound)],
      [state("live", "Never")],
    ]);
    const got = await run(client, (_, gone) => gone === 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(got.titles).toEqual(["One", "Two"]);
    expect(got.gone).toBe(1);
    expect(calls.stream).toBe(1);
  });

  it("a token that opens nothing is gone at once", async () => {
    const { client, calls } = reader(new ConnectError("share does not exist", Code.NotFound), []);
    const got = await run(client, (_, gone) => gone === 1);
    expect(got.titles).toEqual([]);
    expect(calls).toEqual({ get: 1, stream: 0 });
  });

  it("a failed first read is tried again", async () => {
    let n = 0;
    const client = {
      getSharedConversation: async () => {
        if (n++ === 0) throw new ConnectError("down", Code.Unavailable);
        return state("snapshot", "Later");
      },
      streamSharedConversation: () => {
        throw new Error("a snapshot share opens no stream");
      },
    } as unknown as ShareReader;
    const got = await run(client, (t) => t.length === 1);
    expect(got.titles).toEqual(["Later"]);
    expect(n).toBe(2);
  });
});
