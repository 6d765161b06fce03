// Uploads in flight: the files a composer attaches before its message is
// sent. UploadStore holds them outside React (add, progress, remove) and
// checks the server's limits (GetServerInfo's max_file_bytes and
// max_files_per_message) before a byte is sent; useUploads gives it to a
// component.

import { errorMessage, uploadFile, type ConvoClient, type FileInfo, type Uploadable, type UploadOptions } from "@convo/client";
import { useEffect, useMemo, useState, useSyncExternalStore } from "react";
import { useClient } from "./provider.js";

/** The server's limits on files (GetServerInfo). */
export interface UploadLimits {
  /** The largest file the server takes, in bytes. */
  maxFileBytes: number;
  /** The most files one message holds. */
  maxFilesPerMessage: number;
}

/**
 * An upload: uploading (progress 0..1), done (file set), failed (the
 * server refused it or the network failed: error says why), or refused
 * here before anything was sent (over a limit, empty: error says which).
 */
export interface Upload {
  /** The upload's own id (not the file's: that is file.id once done). */
  id: string;
  name: string;
  size: number;
  /** The type the browser gives the file ("" when it knows none). */
  type: string;
  /** The file as given, for a preview before it is uploaded. */
  source: Uploadable | null;
  /** 0..1 of the request sent; 1 once done. */
  progress: number;
  status: "uploading" | "done" | "failed" | "refused";
  error: string | null;
  /** The server's file once done. */
  file: FileInfo | null;
}

/** formatBytes says a size for people: "512 B", "2.4 KB", "25 MB" (units of 1024). */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const s = v >= 10 || Number.isInteger(v) ? Math.round(v).toString() : v.toFixed(1);
  return `${s} ${units[u]}`;
}

/** The upload function UploadStore calls: uploadFile with its client, unless a test gives another. */
export type UploadFn = (file: Uploadable, o: UploadOptions) => Promise<FileInfo>;

let nextId = 0;

/**
 * UploadStore holds a composer's uploads, in the order they were added.
 * It refuses, before uploading, a file over limits' maxFileBytes, an empty
 * one, and any past limits' maxFilesPerMessage (counting the uploads not
 * failed or refused); limits resolving to null (the server did not say)
 * leaves those checks to the server.
 */
export class UploadStore {
  private uploads: Upload[] = [];
  private listeners = new Set<() => void>();
  private aborts = new Map<string, AbortController>();

  constructor(
    private readonly upload: UploadFn,
    private readonly limits: () => Promise<UploadLimits | null>,
  ) {}

  /** getSnapshot and subscribe are for useSyncExternalStore. */
  getSnapshot = (): Upload[] => this.uploads;
  subscribe = (l: () => void): (() => void) => {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  };

  /**
   * add starts uploading files, after the limits' checks; it resolves when
   * every one of them is done, failed or refused (it never rejects).
   */
  add = async (files: Iterable<Uploadable>): Promise<void> => {
    const added = [...files].map((f): Upload => ({
      id: `upload-${++nextId}`,
      name: f.name || "file",
      size: f.size,
      type: f.type,
      source: f,
      progress: 0,
      status: "uploading",
      error: null,
      file: null,
    }));
    if (added.length === 0) return;
    this.set([...this.uploads, ...added]);
    let limits: UploadLimits | null = null;
    try {
      limits = await this.limits();
    } catch {
      limits = null; // the server still checks
    }
    const runs: Promise<void>[] = [];
    for (const u of added) {
      if (!this.find(u.id)) continue; // removed meanwhile
      const refusal = this.refusal(u, limits);
      if (refusal) {
        this.patch(u.id, { status: "refused", error: refusal });
        continue;
      }
      runs.push(this.run(u));
    }
    await Promise.all(runs);
  };

  /** remove drops an upload, aborting it when in flight (the server keeps nothing of it). */
  remove = (id: string): void => {
    this.aborts.get(id)?.abort();
    this.aborts.delete(id);
    this.set(this.uploads.filter((u) => u.id !== id));
  };

  /** clear drops every upload (after the message is sent), aborting those in flight. */
  clear = (): void => {
    for (const a of this.aborts.values()) a.abort();
    this.aborts.clear();
    if (this.uploads.length > 0) this.set([]);
  };

  /**
   * seed puts files uploaded before (a message's, being edited) as done
   * uploads, replacing every upload: editMessage keeps those of them still
   * there when the edit is sent.
   */
  seed = (files: readonly FileInfo[]): void => {
    this.clear();
    this.set(
      files.map((f) => ({
        id: `upload-${++nextId}`,
        name: f.filename,
        size: f.size,
        type: f.mediaType,
        source: null,
        progress: 1,
        status: "done",
        error: null,
        file: f,
      })),
    );
  };

  private refusal(u: Upload, limits: UploadLimits | null): string | null {
    if (u.size === 0) return `${u.name} is empty: there is nothing to upload.`;
    if (!limits) return null;
    if (u.size > limits.maxFileBytes) {
      // Sizes that round alike are said in bytes, so the message shows the difference.
      let [size, max] = [formatBytes(u.size), formatBytes(limits.maxFileBytes)];
      if (size === max) [size, max] = [`${u.size} bytes`, `${limits.maxFileBytes} bytes`];
      return `${u.name} is ${size}: files can be at most ${max}.`;
    }
    // The uploads before this one that the message will hold.
    const at = this.uploads.findIndex((o) => o.id === u.id);
    const before = this.uploads.slice(0, at).filter((o) => o.status === "uploading" || o.status === "done").length;
    if (before >= limits.maxFilesPerMessage) {
      return `${u.name} was not added: a message holds at most ${limits.maxFilesPerMessage} files.`;
    }
    return null;
  }

  private async run(u: Upload): Promise<void> {
    const ac = new AbortController();
    this.aborts.set(u.id, ac);
    try {
      const file = await this.upload(u.source!, {
        signal: ac.signal,
        onProgress: (loaded, total) => {
          if (total > 0) this.patch(u.id, { progress: Math.min(1, loaded / total) });
        },
      });
      this.patch(u.id, { status: "done", progress: 1, file });
    } catch (err) {
      if (!ac.signal.aborted) this.patch(u.id, { status: "failed", error: errorMessage(err) });
    } finally {
      this.aborts.delete(u.id);
    }
  }

  private find(id: string): Upload | undefined {
    return this.uploads.find((u) => u.id === id);
  }

  private patch(id: string, change: Partial<Upload>): void {
    if (!this.find(id)) return;
    this.set(this.uploads.map((u) => (u.id === id ? { ...u, ...change } : u)));
  }

  private set(uploads: Upload[]): void {
    this.uploads = uploads;
    for (const l of this.listeners) l();
  }
}

/** What useUploads returns. */
export interface Uploads {
  uploads: Upload[];
  /** The ids of the files done, in order: sendMessage's and editMessage's fileIds. */
  fileIds: string[];
  /** Some upload is still in flight: the message waits for it. */
  busy: boolean;
  add: (files: Iterable<Uploadable>) => Promise<void>;
  remove: (id: string) => void;
  clear: () => void;
  seed: (files: readonly FileInfo[]) => void;
  /** The server's limits, once GetServerInfo answered (null before, or when it failed). */
  limits: UploadLimits | null;
}

const limitsByClient = new WeakMap<ConvoClient, Promise<UploadLimits | null>>();
const knownLimits = new WeakMap<ConvoClient, UploadLimits>();

/**
 * serverLimits asks the server's file limits (GetServerInfo) once per
 * client; null when it does not answer them (an older server: 0) or the
 * call fails, and asked again next time.
 */
export function serverLimits(client: ConvoClient): Promise<UploadLimits | null> {
  let p = limitsByClient.get(client);
  if (!p) {
    p = client.getServerInfo({}).then(
      (info) => {
        if (info.maxFileBytes <= 0n || info.maxFilesPerMessage <= 0) return null;
        const l = { maxFileBytes: Number(info.maxFileBytes), maxFilesPerMessage: info.maxFilesPerMessage };
        knownLimits.set(client, l);
        return l;
      },
      () => {
        limitsByClient.delete(client);
        return null;
      },
    );
    limitsByClient.set(client, p);
  }
  return p;
}

/**
 * useUploads holds a composer's uploads (UploadStore) with the
 * ConvoProvider's client (or the one given): add uploads files at once,
 * each with its progress, refusing before upload a file past the server's
 * limits with a message that says the limit. Uploads still in flight when
 * the component unmounts are aborted.
 */
export function useUploads(given?: ConvoClient): Uploads {
  const client = useClient(given, "useUploads");
  const store = useMemo(
    () => new UploadStore((f, o) => uploadFile(client, f, o), () => serverLimits(client)),
    [client],
  );
  useEffect(() => () => store.clear(), [store]);
  const [limits, setLimits] = useState<UploadLimits | null>(() => knownLimits.get(client) ?? null);
  useEffect(() => {
    let live = true;
    void serverLimits(client).then((l) => live && setLimits(l));
    return () => {
      live = false;
    };
  }, [client]);
  const uploads = useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot);
  return useMemo(
    () => ({
      uploads,
      fileIds: uploads.flatMap((u) => (u.status === "done" && u.file ? [u.file.id] : [])),
      busy: uploads.some((u) => u.status === "uploading"),
      add: store.add,
      remove: store.remove,
      clear: store.clear,
      seed: store.seed,
      limits,
    }),
    [uploads, store, limits],
  );
}
