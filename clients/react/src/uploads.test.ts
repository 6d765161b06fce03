import { Code, ConnectError, type FileInfo, type UploadOptions } from "@convo/client";
import { describe, expect, it, vi } from "vitest";
import { formatBytes, UploadStore, type UploadLimits } from "./uploads.js";

const info = (id: string, name: string, size: number): FileInfo => ({
  id,
  filename: name,
  mediaType: "image/png",
  size,
  sha256: "ab",
  createdAt: "2026-11-28T06:50:00Z",
  url: `/v1/files/${id}/content?exp=1&sig=s`,
});

/** fakeUploads records every upload asked of the server and lets the test answer each. */
function fakeUploads() {
  const calls: { file: Blob & { name?: string }; o: UploadOptions; resolve: (f: FileInfo) => void; reject: (e: unknown) => void }[] = [];
  const upload = (file: Blob & { name?: string }, o: UploadOptions) =>
    new Promise<FileInfo>((resolve, reject) => {
      calls.push({ file, o, resolve, reject });
      o.signal?.addEventListener("abort", () => reject(new ConnectError("cancelled", Code.Canceled)));
    });
  return { calls, upload };
}

const limits: UploadLimits = { maxFileBytes: 1000, maxFilesPerMessage: 2 };
const file = (name: string, size: number) => new File([new Uint8Array(size)], name, { type: "image/png" });

describe("UploadStore", () => {
  it("uploads each file with its progress, and is done with the server's file", async () => {
    const { calls, upload } = fakeUploads();
    const store = new UploadStore(upload, async () => limits);
    const snapshots: number[][] = [];
    store.subscribe(() => snapshots.push(store.getSnapshot().map((u) => u.progress)));
    const added = store.add([file("a.png", 10)]);
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    expect(store.getSnapshot()[0]).toMatchObject({ name: "a.png", size: 10, status: "uploading", progress: 0 });
    calls[0].o.onProgress!(50, 200);
    expect(store.getSnapshot()[0].progress).toBe(0.25);
    calls[0].resolve(info("f1", "a.png", 10));
    await added;
    expect(store.getSnapshot()[0]).toMatchObject({ status: "done", progress: 1, file: info("f1", "a.png", 10), error: null });
    expect(snapshots).toContainEqual([0.25]);
  });

  it("refuses before uploading a file over the server's limit, an empty one, and one past the files per message, saying the limit", async () => {
    const { calls, upload } = fakeUploads();
    const store = new UploadStore(upload, async () => limits);
    const added = store.add([file("big.png", 1001), file("empty.png", 0), file("a.png", 1), file("b.png", 1), file("c.png", 1)]);
    await vi.waitFor(() => expect(calls).toHaveLength(2));
    expect(calls.map((c) => c.file.name)).toEqual(["a.png", "b.png"]);
    const by = Object.fromEntries(store.getSnapshot().map((u) => [u.name, u]));
    expect(by["big.png"]).toMatchObject({ status: "refused", error: "big.png is 1001 B: files can be at most 1000 B." });
    const near = new UploadStore(upload, async () => ({ maxFileBytes: 65536, maxFilesPerMessage: 2 }));
    await near.add([file("near.bin", 65537)]);
    expect(near.getSnapshot()[0].error).toBe("near.bin is 65537 bytes: files can be at most 65536 bytes.");
    expect(by["empty.png"]).toMatchObject({ status: "refused", error: "empty.png is empty: there is nothing to upload." });
    expect(by["c.png"]).toMatchObject({ status: "refused", error: "c.png was not added: a message holds at most 2 files." });
    calls[0].resolve(info("f1", "a.png", 1));
    calls[1].resolve(info("f2", "b.png", 1));
    await added;
  });

  it("counts a removed upload no more against the files per message", async () => {
    const { calls, upload } = fakeUploads();
    const store = new UploadStore(upload, async () => ({ maxFileBytes: 1000, maxFilesPerMessage: 1 }));
    void store.add([file("a.png", 1)]);
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    store.remove(store.getSnapshot()[0].id);
    void store.add([file("b.png", 1)]);
    await vi.waitFor(() => expect(calls).toHaveLength(2));
    expect(calls.map((c) => c.file.name)).toEqual(["a.png", "b.png"]);
    expect(store.getSnapshot().map((u) => u.status)).toEqual(["uploading"]);
  });

  it("shows the server's refusal as a failed upload", async () => {
    const { calls, upload } = fakeUploads();
    const store = new UploadStore(upload, async () => limits);
    const added = store.add([file("a.png", 5)]);
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    calls[0].reject(new ConnectError("mediaType: declared \"image/png\", but the bytes are \"text/html\"", Code.InvalidArgument));
    await added;
    expect(store.getSnapshot()[0]).toMatchObject({ status: "failed", error: "mediaType: declared \"image/png\", but the bytes are \"text/html\"" });
  });

  it("aborts an upload in flight when removed or cleared", async () => {
    const { calls, upload } = fakeUploads();
    const store = new UploadStore(upload, async () => limits);
    const added = store.add([file("a.png", 5), file("b.png", 5)]);
    await vi.waitFor(() => expect(calls).toHaveLength(2));
    store.remove(store.getSnapshot()[0].id);
    expect(calls[0].o.signal!.aborted).toBe(true);
    expect(calls[1].o.signal!.aborted).toBe(false);
    store.clear();
    expect(calls[1].o.signal!.aborted).toBe(true);
    await added;
    expect(store.getSnapshot()).toEqual([]);
  });

  it("leaves the limits to the server when it does not say them", async () => {
    const { calls, upload } = fakeUploads();
    const store = new UploadStore(upload, () => Promise.reject(new Error("unavailable")));
    void store.add([file("big.png", 5000)]);
    await vi.waitFor(() => expect(calls).toHaveLength(1));
  });

  it("seeds a message's files as done uploads (an edit keeps them)", () => {
    const store = new UploadStore(fakeUploads().upload, async () => limits);
    store.seed([info("f1", "a.png", 3), info("f2", "b.pdf", 4)]);
    expect(store.getSnapshot().map((u) => [u.status, u.file?.id, u.name])).toEqual([
      ["done", "f1", "a.png"],
      ["done", "f2", "b.pdf"],
    ]);
  });
});

describe("formatBytes", () => {
  it("says sizes in B, KB, MB", () => {
    expect([0, 512, 1024, 1536, 2.4 * 1024 * 1024, 25 * 1024 * 1024].map(formatBytes)).toEqual(["0 B", "512 B", "1 KB", "1.5 KB", "2.4 MB", "25 MB"]);
  });
});
