import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createConvoClient, sendMessage, editMessage } from "./client.js";
import { fileUrl, getFile, uploadFile } from "./files.js";
import { createRouterTransport } from "@connectrpc/connect";
import { ConversationService } from "./gen/convo/v1/conversation_service_pb.js";

/**
 * FakeXHR is the browser's XMLHttpRequest as uploadFile uses it: it
 * records the request and lets the test play the browser's part
 * (progress, the answer, a network error, an abort).
 */
class FakeXHR {
  static last: FakeXHR | undefined;
  static count = 0;
  method = "";
  url = "";
  headers: Record<string, string> = {};
  body: FormData | undefined;
  responseType = "";
  status = 0;
  responseText = "";
  aborted = false;
  upload: { onprogress: ((e: { loaded: number; total: number; lengthComputable: boolean }) => void) | null } = { onprogress: null };
  onload: (() => void) | null = null;
  onerror: (() => void) | null = null;
  onabort: (() => void) | null = null;
  constructor() {
    FakeXHR.last = this;
    FakeXHR.count++;
  }
  open(method: string, url: string) {
    this.method = method;
    this.url = url;
  }
  setRequestHeader(k: string, v: string) {
    this.headers[k] = v;
  }
  send(body: FormData) {
    this.body = body;
  }
  abort() {
    this.aborted = true;
    this.onabort?.();
  }
  progress(loaded: number, total: number) {
    this.upload.onprogress?.({ loaded, total, lengthComputable: true });
  }
  answer(status: number, body: unknown) {
    this.status = status;
    this.responseText = typeof body === "string" ? body : JSON.stringify(body);
    this.onload?.();
  }
}

const fileJSON = {
  id: "0f0c6a1e-1d1b-4c55-9d1c-5a0a3f1f2b11",
  filename: "cat.png",
  mediaType: "image/png",
  size: 5,
  sha256: "ab".repeat(32),
  createdAt: "2026-11-28T06:50:00Z",
  url: "/v1/files/0f0c6a1e-1d1b-4c55-9d1c-5a0a3f1f2b11/content?exp=1&sig=x",
};

/** sent waits until uploadFile has sent its request (the token is awaited first). */
async function sent(): Promise<FakeXHR> {
  await vi.waitFor(() => expect(FakeXHR.last?.body).toBeDefined());
  return FakeXHR.last!;
}

beforeEach(() => {
  FakeXHR.last = undefined;
  FakeXHR.count = 0;
  vi.stubGlobal("XMLHttpRequest", FakeXHR);
});
afterEach(() => vi.unstubAllGlobals());

describe("uploadFile", () => {
  it("posts the file as multipart to the client's base URL with its token, reports progress, and resolves to the server's file", async () => {
    const client = createConvoClient({ baseUrl: "https://api.example.com/", getToken: async () => "tok" });
    const progress: [number, number][] = [];
    const blob = new File([new Uint8Array([137, 80, 78, 71, 13])], "cat.png", { type: "image/png" });
    const p = uploadFile(client, blob, { onProgress: (l, t) => progress.push([l, t]) });
    const xhr = await sent();
    expect(xhr.method).toBe("POST");
    expect(xhr.url).toBe("https://api.example.com/v1/files");
    expect(xhr.headers).toEqual({ Authorization: "Bearer tok" });
    const part = xhr.body!.get("file") as File;
    expect(part.name).toBe("cat.png");
    expect(new Uint8Array(await part.arrayBuffer())).toEqual(new Uint8Array([137, 80, 78, 71, 13]));
    xhr.progress(100, 400);
    xhr.progress(400, 400);
    xhr.answer(201, fileJSON);
    await expect(p).resolves.toEqual(fileJSON);
    expect(progress).toEqual([
      [100, 400],
      [400, 400],
    ]);
  });

  it("names a Blob without a name 'file' and sends no Authorization without a token", async () => {
    const client = createConvoClient({ baseUrl: "" });
    const p = uploadFile(client, new Blob(["hello"], { type: "text/plain" }));
    const xhr = await sent();
    expect(xhr.url).toBe("/v1/files");
    expect(xhr.headers).toEqual({});
    expect((xhr.body!.get("file") as File).name).toBe("file");
    xhr.answer(201, { ...fileJSON, filename: "file" });
    await expect(p).resolves.toMatchObject({ filename: "file" });
  });

  it("rejects with the server's code and message", async () => {
    const client = createConvoClient({ baseUrl: "" });
    const cases: [number, unknown, Code, string][] = [
      [413, { code: "invalid_argument", message: "file: larger than the limit of 26214400 bytes (25 MiB)" }, Code.InvalidArgument, "file: larger than the limit of 26214400 bytes (25 MiB)"],
      [429, { code: "resource_exhausted", message: "file: the user's files hold 1073741824 bytes" }, Code.ResourceExhausted, "file: the user's files hold 1073741824 bytes"],
      [502, "<html>bad gateway</html>", Code.Unavailable, "HTTP 502"],
    ];
    for (const [status, body, code, message] of cases) {
      const p = uploadFile(client, new Blob(["x"]));
      (await sent()).answer(status, body);
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(code);
      expect((err as ConnectError).rawMessage).toBe(message);
      FakeXHR.last = undefined;
    }
  });

  it("calls onUnauthenticated when the server refuses the token", async () => {
    const onUnauthenticated = vi.fn();
    const client = createConvoClient({ baseUrl: "", getToken: () => "old", onUnauthenticated });
    const p = uploadFile(client, new Blob(["x"]));
    (await sent()).answer(401, { code: "unauthenticated", message: "the token has expired" });
    await expect(p).rejects.toMatchObject({ code: Code.Unauthenticated });
    expect(onUnauthenticated).toHaveBeenCalledOnce();
  });

  it("is cancelled by its signal: the request is aborted", async () => {
    const client = createConvoClient({ baseUrl: "" });
    const ac = new AbortController();
    const p = uploadFile(client, new Blob(["x"]), { signal: ac.signal });
    const xhr = await sent();
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: Code.Canceled });
    expect(xhr.aborted).toBe(true);
  });

  it("sends nothing when its signal is already aborted", async () => {
    const client = createConvoClient({ baseUrl: "" });
    const ac = new AbortController();
    ac.abort();
    await expect(uploadFile(client, new Blob(["x"]), { signal: ac.signal })).rejects.toMatchObject({ code: Code.Canceled });
    expect(FakeXHR.count).toBe(0);
  });

  it("rejects a network failure as Unavailable", async () => {
    const client = createConvoClient({ baseUrl: "" });
    const p = uploadFile(client, new Blob(["x"]));
    (await sent()).onerror!();
    await expect(p).rejects.toMatchObject({ code: Code.Unavailable });
  });

  it("refuses a client not made by createConvoClient, saying why", () => {
    const client = createConvoClient({ baseUrl: "" });
    const other = { ...client };
    expect(() => uploadFile(other, new Blob(["x"]))).toThrow(/not made by createConvoClient/);
  });
});

describe("getFile and fileUrl", () => {
  it("reads a file's JSON with the token, and maps a 404 to NotFound", async () => {
    const seen: [string, string | null][] = [];
    vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
      seen.push([url, new Headers(init.headers).get("Authorization")]);
      return url.endsWith(fileJSON.id)
        ? new Response(JSON.stringify(fileJSON), { status: 200 })
        : new Response(JSON.stringify({ code: "not_found", message: "file: not found" }), { status: 404 });
    });
    const client = createConvoClient({ baseUrl: "http://h", getToken: () => "tok" });
    await expect(getFile(client, fileJSON.id)).resolves.toEqual(fileJSON);
    await expect(getFile(client, "other")).rejects.toMatchObject({ code: Code.NotFound, rawMessage: "file: not found" });
    expect(seen).toEqual([
      [`http://h/v1/files/${fileJSON.id}`, "Bearer tok"],
      ["http://h/v1/files/other", "Bearer tok"],
    ]);
  });

  it("makes a relative url absolute against the base URL", () => {
    expect(fileUrl(createConvoClient({ baseUrl: "https://api.example.com" }), fileJSON.url)).toBe(`https://api.example.com${fileJSON.url}`);
    expect(fileUrl(createConvoClient({ baseUrl: "" }), fileJSON.url)).toBe(fileJSON.url);
    expect(fileUrl(createConvoClient({ baseUrl: "https://a" }), "https://cdn/x")).toBe("https://cdn/x");
  });
});

describe("sendMessage and editMessage with files", () => {
  it("send the file ids", async () => {
    const got: unknown[] = [];
    const transport = createRouterTransport(({ service }) => {
      service(ConversationService, {
        sendMessage: (req) => {
          got.push(["send", req.text, req.fileIds]);
          return {};
        },
        editMessage: (req) => {
          got.push(["edit", req.text, req.fileIds]);
          return {};
        },
      });
    });
    const client = createConvoClient({ baseUrl: "", transport });
    await sendMessage(client, "", { fileIds: ["a", "b"] });
    await editMessage(client, "c", "m", "new", { fileIds: ["b"] });
    await sendMessage(client, "text only");
    expect(got).toEqual([
      ["send", "", ["a", "b"]],
      ["edit", "new", ["b"]],
      ["send", "text only", []],
    ]);
  });
});
