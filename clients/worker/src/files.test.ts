// The files of a prompt's context against real PostgreSQL: the job's
// history gives each user message its files with their bytes (a message
// of files only included), a handler acknowledges them from the bytes,
// and the AI SDK adapter hands them to the model as file parts.

import { createHash, randomUUID } from "node:crypto";
import { streamText } from "ai";
import type pg from "pg";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { toModelMessages, writeStreamText } from "./ai-sdk.js";
import { Worker, type Job, type PromptFile } from "./index.js";
import { blocks, settledAs, testDatabase, type Sent, type TestDatabase } from "./testing/db.js";
import { finish, scriptedModel, textParts } from "./testing/models.js";

let db: TestDatabase;
let worker: Worker | undefined;

beforeEach(async () => {
  db = await testDatabase();
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await db.drop();
});

async function serve(handler: (job: Job) => Promise<void>, maxFileBytes?: number): Promise<void> {
  worker = new Worker({ connectionString: db.url, slots: 1, pollIntervalMs: 200, handler, maxFileBytes });
  await worker.start();
}

const chunkBytes = 256 * 1024;

/** Stores bytes as owner "local"'s file, as an upload does (chunks of 256 KiB), and returns its id. */
async function upload(pool: pg.Pool, filename: string, mediaType: string, bytes: Uint8Array): Promise<string> {
  const blob = randomUUID();
  const id = randomUUID();
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  await pool.query(`INSERT INTO convo.file_blobs (id, owner, sha256, size, storage) VALUES ($1, 'local', $2, $3, 'postgres')`, [
    blob,
    sha256,
    bytes.length,
  ]);
  for (let seq = 0; seq * chunkBytes < bytes.length; seq++) {
    await pool.query(`INSERT INTO convo.file_chunks (blob_id, seq, data) VALUES ($1, $2, $3)`, [
      blob,
      seq,
      Buffer.from(bytes.subarray(seq * chunkBytes, (seq + 1) * chunkBytes)),
    ]);
  }
  await pool.query(
    `INSERT INTO convo.files (id, owner, blob_id, filename, media_type, size, sha256) VALUES ($1, 'local', $2, $3, $4, $5, $6)`,
    [id, blob, filename, mediaType, bytes.length, sha256],
  );
  return id;
}

async function sendFiles(pool: pg.Pool, text: string, fileIds: string[], conversationId?: string): Promise<Sent> {
  const { rows } = await pool.query(
    `SELECT conversation_id::text, assistant_message_ids[1]::text AS message_id, prompt_ids[1]::text AS prompt_id
       FROM convo.send_message('local', $1, $2, '[{}]'::jsonb, NULL, $3::uuid[])`,
    [conversationId ?? null, text, fileIds],
  );
  return { conversationId: rows[0].conversation_id, promptId: rows[0].prompt_id, messageId: rows[0].message_id };
}

/** What the demo model says of a file, from its bytes. */
function acknowledge(f: PromptFile): string {
  const first = f.data && f.mediaType.startsWith("text/") ? new TextDecoder().decode(f.data).split("\n")[0] : undefined;
  return `You attached ${f.filename} (${f.mediaType.split(";")[0]}, ${f.size} B)` + (first !== undefined ? `; its first line: "${first}".` : ".");
}

const enc = new TextEncoder();

describe("files", () => {
  it("gives each user message its files with their bytes, a message of files only included", async () => {
    const notes = await upload(db.pool, "notes.txt", "text/plain; charset=utf-8", enc.encode("Hello from the notes\nsecond line\n"));
    const big = new Uint8Array(2 * chunkBytes + 1000).map((_, i) => (i * 7) & 0xff);
    const bigId = await upload(db.pool, "big.bin", "application/octet-stream", big);
    const seen: Job["history"][] = [];
    await serve(async (job) => {
      seen.push(job.history);
      const last = job.history.at(-1);
      job.reply.text(last?.role === "user" ? (last.files ?? []).map(acknowledge).join("\n") : "no user message");
    });

    const first = await sendFiles(db.pool, "see the notes", [notes]);
    expect((await settledAs(db.pool, first.promptId, "completed", "failed")).status).toBe("completed");
    expect((await blocks(db.pool, first.messageId))[0].content).toBe('You attached notes.txt (text/plain, 33 B); its first line: "Hello from the notes".');

    const second = await sendFiles(db.pool, "", [bigId], first.conversationId);
    expect((await settledAs(db.pool, second.promptId, "completed", "failed")).status).toBe("completed");
    const history = seen[1];
    expect(history.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    const [u1, , u2] = history;
    if (u1.role !== "user" || u2.role !== "user") throw new Error("not user messages");
    expect(u1.text).toBe("see the notes");
    expect(u1.files?.map((f) => f.filename)).toEqual(["notes.txt"]);
    expect(u2.text).toBe("");
    expect(u2.files).toHaveLength(1);
    expect(Buffer.from(u2.files![0].data!).equals(Buffer.from(big))).toBe(true);
    expect(u2.files![0]).toMatchObject({ id: bigId, size: big.length, storage: "postgres", mediaType: "application/octet-stream" });
  });

  it("gives a file past maxFileBytes without its bytes", async () => {
    const id = await upload(db.pool, "notes.txt", "text/plain", enc.encode("0123456789"));
    let file: PromptFile | undefined;
    await serve(async (job) => {
      const last = job.history.at(-1);
      if (last?.role === "user") file = last.files?.[0];
      job.reply.text("ok");
    }, 9);
    const sent = await sendFiles(db.pool, "hi", [id]);
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    expect(file).toMatchObject({ filename: "notes.txt", size: 10 });
    expect(file?.data).toBeUndefined();
  });

  it("hands the model each file as an AI SDK file part", async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);
    const photo = await upload(db.pool, "photo.png", "image/png", png);
    const notes = await upload(db.pool, "notes.txt", "text/plain; charset=utf-8", enc.encode("Hello\n"));
    const model = scriptedModel([[...textParts("t1", "Nice picture."), finish()]]);
    await serve(async (job) => {
      await writeStreamText(job, streamText({ model, messages: toModelMessages(job.history), abortSignal: job.signal }));
    });
    const sent = await sendFiles(db.pool, "what is this?", [photo, notes]);
    expect((await settledAs(db.pool, sent.promptId, "completed", "failed")).status).toBe("completed");
    const user = model.doStreamCalls[0].prompt.find((m) => m.role === "user");
    expect(user?.content).toMatchObject([
      { type: "text", text: "what is this?" },
      { type: "file", mediaType: "image/png", filename: "photo.png" },
      { type: "file", mediaType: "text/plain", filename: "notes.txt" },
    ]);
    // The provider gets the bytes, tagged ({type: "data", data}).
    const parts = user?.content as Array<{ type: string; data?: { type: string; data: Uint8Array | string } }>;
    const data = parts[1].data!;
    expect(data.type).toBe("data");
    const bytes = typeof data.data === "string" ? Buffer.from(data.data, "base64") : Buffer.from(data.data);
    expect(bytes.equals(Buffer.from(png))).toBe(true);
  });
});
