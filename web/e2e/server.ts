// Launching the real server for end-to-end tests: `go run ./cmd/api` from
// the repository root, on a free port, with a fresh embedded PostgreSQL and
// the demo model, waiting for /healthz.

import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const webDir = path.resolve(here, "..");
const repo = path.resolve(webDir, "..");
const logDir = path.join(webDir, "test-results");

export interface Launched {
  /** base is where the app is served. */
  base: string;
  /** api is where the Connect API answers. */
  api: string;
  stop: () => Promise<void>;
}

/**
 * launch starts a server with extra environment. name prefixes its log files
 * under web/test-results. With needWorker, it makes sure prompts get answered.
 */
export async function launch(name: string, env: Record<string, string> = {}, opts: { needWorker?: boolean } = {}): Promise<Launched> {
  mkdirSync(logDir, { recursive: true });
  // PostgreSQL runs as the postgres user when we are root: its data
  // directory's parents must be reachable by that user.
  const tmp = mkdtempSync(path.join(os.tmpdir(), "convo-e2e-"));
  chmodSync(tmp, 0o755);
  const procs: Proc[] = [];
  const stop = async () => {
    for (const p of procs.reverse()) await p.stop();
    rmSync(tmp, { recursive: true, force: true });
  };

  try {
    const port = await freePort();
    const api = `http://127.0.0.1:${port}`;
    const server = start(`${name}-api`, "go", ["run", "./cmd/api"], repo, {
      CONVO_HTTP_ADDR: `127.0.0.1:${port}`,
      CONVO_DATA_DIR: path.join(tmp, "pg"),
      CONVO_EMBED_PORT: "0",
      ...env,
    });
    procs.push(server);
    // The first `go run` compiles the server: allow for it.
    await waitFor(`${api}/healthz`, server, 300_000);
    let base = api;

    // Until cmd/api serves the app and runs the demo worker itself, stand
    // in for them with `vite preview` and `go run ./cmd/worker`.
    if (!(await servesApp(api))) {
      if (!existsSync(path.join(webDir, "dist", "index.html"))) {
        throw new Error("the server does not serve the app, and web/dist is not built: npm run build --prefix web");
      }
      const previewPort = await freePort();
      const preview = start(
        `${name}-preview`,
        path.join(webDir, "node_modules", ".bin", "vite"),
        ["preview", "--port", String(previewPort), "--strictPort", "--host", "127.0.0.1"],
        webDir,
        { CONVO_API: api },
      );
      procs.push(preview);
      base = `http://127.0.0.1:${previewPort}`;
      await waitFor(`${base}/`, preview, 60_000);
      console.warn(`[e2e] ${api}/ does not serve the web app yet: using vite preview at ${base}`);
    }
    const probe = opts.needWorker ? await call(api, "SendMessage", { text: "e2e probe: is a worker there?" }) : null;
    if (probe && !(await answered(api, probe, 8_000))) {
      const dsn = /convo database \(workers, psql\): (postgres:\/\/\S+)/.exec(server.output())?.[1];
      if (!dsn) throw new Error("no worker answers prompts, and the server logged no database URL");
      const worker = start(`${name}-worker`, "go", ["run", "./cmd/worker"], repo, {
        DATABASE_URL: dsn,
        CONVO_DEFAULT_PROVIDER: "demo",
      });
      procs.push(worker);
      console.warn("[e2e] the server runs no demo worker yet: started go run ./cmd/worker");
      if (!(await answered(api, probe, 300_000))) throw new Error("the demo worker does not answer prompts");
    }
    return { base, api, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

interface Proc {
  output: () => string;
  exited: () => boolean;
  stop: () => Promise<void>;
}

function start(name: string, cmd: string, args: string[], cwd: string, env: Record<string, string>): Proc {
  const log = createWriteStream(path.join(logDir, `${name}.log`));
  // Its own process group, so that stopping it also stops what `go run` started.
  const child: ChildProcess = spawn(cmd, args, {
    cwd,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let exited = false;
  const onData = (d: Buffer) => {
    if (!log.writableEnded) log.write(d);
    if (out.length < 200_000) out += d.toString();
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  const done = new Promise<void>((resolve) => child.on("exit", () => ((exited = true), resolve())));
  return {
    output: () => out,
    exited: () => exited,
    stop: async () => {
      if (exited || child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        return;
      }
      const killed = await Promise.race([done.then(() => true), sleep(30_000).then(() => false)]);
      if (!killed) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          /* gone */
        }
      }
      log.end();
    },
  };
}

async function waitFor(url: string, proc: Proc, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.exited()) throw new Error(`it exited before ${url} answered:\n${proc.output().slice(-4000)}`);
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      /* not yet */
    }
    await sleep(250);
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms:\n${proc.output().slice(-4000)}`);
}

async function servesApp(base: string): Promise<boolean> {
  try {
    const res = await fetch(`${base}/`);
    return res.ok && (await res.text()).includes('id="root"');
  } catch {
    return false;
  }
}

async function call(base: string, method: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}/convo.v1.ConversationService/${method}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

/** answered reports whether a worker picked up the probe message's prompt in time. */
async function answered(base: string, probe: Record<string, unknown>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const conv = await call(base, "GetConversation", { conversationId: probe.conversationId });
    const messages = (conv.messages ?? []) as { id: string; status?: string }[];
    const reply = messages.find((m) => m.id === probe.assistantMessageId);
    if (reply && reply.status && reply.status !== "pending") return true;
    await sleep(250);
  }
  return false;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}
