// Files (docs/files.md): uploading one over plain HTTP with its progress,
// reading a file's JSON, and the URL of a file's content. Connect has no
// upload progress (nor has fetch), so an upload is an XMLHttpRequest to
// POST /v1/files with the client's base URL and bearer token; its errors
// are ConnectErrors with the server's code and message, as every call's.

import { Code, ConnectError } from "@connectrpc/connect";
import { optionsOf, type ConvoClient, type ConvoOptions } from "./client.js";

/** A file as the server describes it (POST /v1/files, GET /v1/files/{id}). */
export interface FileInfo {
  id: string;
  filename: string;
  /** The media type convo decided from the bytes. */
  mediaType: string;
  size: number;
  /** The hex SHA-256 of the bytes. */
  sha256: string;
  /** When it was uploaded (RFC 3339). */
  createdAt: string;
  /**
   * The signed URL of its content, relative to the server
   * (/v1/files/{id}/content?exp=…&sig=…): usable without a token (an
   * <img src>, a link) for CONVO_FILE_URL_TTL (1 h by default). fileUrl
   * makes it absolute.
   */
  url: string;
}

export interface UploadOptions {
  /**
   * Called as the body is sent: loaded and total bytes of the request
   * (the file and its form's few hundred bytes around it). Once the body
   * is sent, the server still stores and checks it before it answers.
   */
  onProgress?: (loaded: number, total: number) => void;
  /** Aborts the upload: it rejects with Code.Canceled and the server keeps nothing. */
  signal?: AbortSignal;
}

/** A file to upload: a File, or a Blob with the name to give it. */
export type Uploadable = Blob & { name?: string };

/**
 * uploadFile uploads file (POST /v1/files, multipart) with client's base
 * URL and token, and resolves to the file as the server stored it; its id
 * goes into sendMessage's or editMessage's fileIds. The server decides the
 * media type from the bytes and refuses, with nothing stored, a file over
 * its limit (InvalidArgument naming the limit: GetServerInfo's
 * max_file_bytes says it beforehand), an empty one, a bad filename, a
 * declared type the bytes contradict (InvalidArgument), past the user's
 * stored bytes or write rate (ResourceExhausted). A network failure is
 * Unavailable, an abort Canceled. client must come from
 * createConvoClient.
 */
export function uploadFile(client: ConvoClient, file: Uploadable, o: UploadOptions = {}): Promise<FileInfo> {
  const opts = requireOptions(client, "uploadFile");
  return new Promise<FileInfo>((resolve, reject) => {
    if (o.signal?.aborted) {
      reject(new ConnectError("the upload was cancelled", Code.Canceled));
      return;
    }
    const form = new FormData();
    form.append("file", file, file.name || "file");
    let xhr: XMLHttpRequest;
    const onAbort = () => xhr?.abort();
    const done = () => o.signal?.removeEventListener("abort", onAbort);
    Promise.resolve(opts.getToken?.())
      .then((token) => {
        if (o.signal?.aborted) throw new ConnectError("the upload was cancelled", Code.Canceled);
        xhr = new XMLHttpRequest();
        xhr.open("POST", endpoint(opts, "/v1/files"));
        if (token) xhr.setRequestHeader("Authorization", `Bearer ${token}`);
        xhr.responseType = "text";
        xhr.upload.onprogress = (e) => o.onProgress?.(e.loaded, e.lengthComputable ? e.total : file.size);
        xhr.onload = () => {
          done();
          try {
            resolve(fileInfo(answer(opts, xhr.status, xhr.responseText)));
          } catch (err) {
            reject(err);
          }
        };
        xhr.onerror = () => {
          done();
          reject(new ConnectError("the upload failed: the server could not be reached", Code.Unavailable));
        };
        xhr.onabort = () => {
          done();
          reject(new ConnectError("the upload was cancelled", Code.Canceled));
        };
        o.signal?.addEventListener("abort", onAbort);
        xhr.send(form);
      })
      .catch((err) => {
        done();
        reject(ConnectError.from(err));
      });
  });
}

/**
 * getFile reads file id's JSON (GET /v1/files/{id}) with a freshly signed
 * url. Another user's file, or none, is NotFound. client must come from
 * createConvoClient.
 */
export async function getFile(client: ConvoClient, id: string, o: { signal?: AbortSignal } = {}): Promise<FileInfo> {
  const opts = requireOptions(client, "getFile");
  const token = await opts.getToken?.();
  let res: Response;
  try {
    res = await fetch(endpoint(opts, `/v1/files/${encodeURIComponent(id)}`), {
      headers: token ? { Authorization: `Bearer ${token}` } : {},
      signal: o.signal,
    });
  } catch (err) {
    if (o.signal?.aborted) throw new ConnectError("cancelled", Code.Canceled);
    throw new ConnectError(`the server could not be reached: ${String(err)}`, Code.Unavailable);
  }
  return fileInfo(answer(opts, res.status, await res.text()));
}

/**
 * fileUrl makes a file's url (FileInfo.url, Block file's url, relative
 * to the server) absolute against client's base URL, for a page on
 * another origin than the server's; an absolute url is kept.
 */
export function fileUrl(client: ConvoClient, url: string): string {
  const opts = optionsOf(client);
  if (!opts || !url.startsWith("/")) return url;
  return endpoint(opts, url);
}

function requireOptions(client: ConvoClient, fn: string): ConvoOptions {
  const opts = optionsOf(client);
  if (!opts) throw new Error(`${fn}: the client was not made by createConvoClient, so its base URL and token are unknown`);
  return opts;
}

function endpoint(o: ConvoOptions, path: string): string {
  return o.baseUrl.replace(/\/+$/, "") + path;
}

/** The code names of the server's JSON errors ({"code", "message"}), as Connect's. */
const codes: Record<string, Code> = {
  canceled: Code.Canceled,
  unknown: Code.Unknown,
  invalid_argument: Code.InvalidArgument,
  deadline_exceeded: Code.DeadlineExceeded,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  permission_denied: Code.PermissionDenied,
  resource_exhausted: Code.ResourceExhausted,
  failed_precondition: Code.FailedPrecondition,
  aborted: Code.Aborted,
  out_of_range: Code.OutOfRange,
  unimplemented: Code.Unimplemented,
  internal: Code.Internal,
  unavailable: Code.Unavailable,
  data_loss: Code.DataLoss,
  unauthenticated: Code.Unauthenticated,
};

/** codeOfStatus is the code of an answer without a JSON error (a proxy's page). */
function codeOfStatus(status: number): Code {
  if (status === 401) return Code.Unauthenticated;
  if (status === 403) return Code.PermissionDenied;
  if (status === 404) return Code.NotFound;
  if (status === 408) return Code.DeadlineExceeded;
  if (status === 413 || status === 400 || status === 415) return Code.InvalidArgument;
  if (status === 429) return Code.ResourceExhausted;
  if (status === 502 || status === 503 || status === 504) return Code.Unavailable;
  return Code.Unknown;
}

/** answer parses a 2xx JSON body, or throws the error the body or status says. */
function answer(o: ConvoOptions, status: number, body: string): unknown {
  let json: unknown;
  try {
    json = body ? JSON.parse(body) : undefined;
  } catch {
    json = undefined;
  }
  if (status >= 200 && status < 300 && json !== undefined) return json;
  const e = (json ?? {}) as { code?: unknown; message?: unknown };
  const code = (typeof e.code === "string" && codes[e.code]) || codeOfStatus(status);
  const message = typeof e.message === "string" && e.message ? e.message : `HTTP ${status}`;
  if (code === Code.Unauthenticated) o.onUnauthenticated?.();
  throw new ConnectError(message, code);
}

function fileInfo(v: unknown): FileInfo {
  const j = (v ?? {}) as Record<string, unknown>;
  const str = (k: string) => (typeof j[k] === "string" ? (j[k] as string) : "");
  if (!str("id")) throw new ConnectError("the server's answer holds no file id", Code.Internal);
  return {
    id: str("id"),
    filename: str("filename"),
    mediaType: str("mediaType"),
    size: typeof j.size === "number" ? j.size : Number(j.size ?? 0),
    sha256: str("sha256"),
    createdAt: str("createdAt"),
    url: str("url"),
  };
}
