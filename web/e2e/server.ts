// The server under test. prepare() builds what it serves from the current
// sources: web/dist first (failing when the committed bundle was stale), then
// the cmd/api binary, which embeds that bundle. launch() starts the binary on
// a free port with a fresh embedded PostgreSQL and its in-process demo
// workers, and checks that it serves exactly the web/dist just built.

import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, cpSync, createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const webDir = path.resolve(here, "..");
const repo = path.resolve(webDir, "..");
const distDir = path.join(webDir, "dist");
const logDir = path.join(webDir, "test-results");

/** The environment variable through which global-setup hands the built server to the test workers. */
const serverBinEnv = "CONVO_E2E_SERVER_BIN";

export interface Launched {
  /** base is where the app is served (the same server as the API). */
  base: string;
  /** api is where the Connect API answers. */
  api: string;
  stop: () => Promise<void>;
}

/**
 * prepare rebuilds web/dist from the sources and builds cmd/api (with the
 * race detector) into a temporary directory. It throws when the build
 * changed web/dist: the bundle in the tree, which `go run ./cmd/api` and
 * `go build` embed, did not match its sources. It returns a function that
 * removes the binary.
 */
export async function prepare(): Promise<() => void> {
  mkdirSync(logDir, { recursive: true });
  // The named screenshots of this run only.
  rmSync(path.join(logDir, "screens"), { recursive: true, force: true });
  // Built beside web/dist, not over it: a go build or go test running at
  // the same time (cmd/api embeds web/dist) must never find it half
  // written.
  const built = mkdtempSync(path.join(os.tmpdir(), "convo-e2e-dist-"));
  const binDir = mkdtempSync(path.join(os.tmpdir(), "convo-e2e-bin-"));
  const bin = path.join(binDir, "convo-api");
  // Both builds at once: the web build waits on tsc and vite, the Go build
  // mostly on its cache and the linker. The binary embeds the committed
  // web/dist; it is used only when that matched the build (checked below).
  const web = run("build-web", "npm", ["run", "build", "--", "--outDir", built, "--emptyOutDir"], webDir);
  // -race: the browser drives the server much as users would, so a data race
  // shows up here; after `go test -race ./...` its packages are cached.
  const api = run("build-api", "go", ["build", "-race", "-o", bin, "./cmd/api"], repo);
  try {
    const [webBuilt, apiBuilt] = await Promise.allSettled([web, api]);
    if (webBuilt.status === "rejected") throw webBuilt.reason;
    if (hashTree(built) !== hashTree(distDir)) {
      rmSync(distDir, { recursive: true, force: true });
      cpSync(built, distDir, { recursive: true });
      throw new Error(
        "web/dist was stale: it did not match a build of web/src. It has now been rebuilt: commit web/dist " +
          "(npm run build --prefix web after every change under web/src) and run the tests again.",
      );
    }
    if (apiBuilt.status === "rejected") throw apiBuilt.reason;
  } catch (err) {
    rmSync(binDir, { recursive: true, force: true });
    throw err;
  } finally {
    rmSync(built, { recursive: true, force: true });
  }
  process.env[serverBinEnv] = bin;
  return () => rmSync(binDir, { recursive: true, force: true });
}

/**
 * launch starts the server prepare built, with extra environment. name
 * prefixes its log file under web/test-results. stop() fails when the race
 * detector reported anything.
 */
export async function launch(name: string, env: Record<string, string> = {}): Promise<Launched> {
  const bin = process.env[serverBinEnv];
  if (!bin || !existsSync(bin)) {
    throw new Error(`${serverBinEnv} names no server binary: run the tests with npm run e2e, whose global setup builds it`);
  }
  mkdirSync(logDir, { recursive: true });
  // PostgreSQL runs as the postgres user when we are root: its data
  // directory's parents must be reachable by that user.
  const tmp = mkdtempSync(path.join(os.tmpdir(), "convo-e2e-"));
  chmodSync(tmp, 0o755);
  let server: Proc | undefined;
  const stop = async () => {
    await server?.stop();
    rmSync(tmp, { recursive: true, force: true });
    const races = server?.output().match(/WARNING: DATA RACE[\s\S]*?\n==================/g);
    if (races) {
      throw new Error(`the race detector reported ${races.length} data race(s) in the ${name} server (${server?.logFile}):\n${races[0]}`);
    }
  };

  try {
    // Port 0: the server listens where the kernel says and logs its URL.
    // A port picked here and closed before the server binds it could be
    // taken meanwhile, by the embedded PostgreSQL among others (seen in CI).
    server = start(`${name}-api`, bin, [], repo, {
      CONVO_HTTP_ADDR: "127.0.0.1:0",
      CONVO_DATA_DIR: path.join(tmp, "pg"),
      CONVO_EMBED_PORT: "0",
      // Both replies of an A/B comparison at once, while the other test
      // worker's reply runs too: no prompt waits in the queue.
      CONVO_WORKERS: "4",
      ...env,
    });
    const api = await servingURL(server, 60_000);
    await waitFor(`${api}/healthz`, server, 60_000);
    await checkServesDist(api);
    return { base: api, api, stop };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}

/** checkServesDist fails unless the server answers / with web/dist/index.html, which names the bundle's hashed files. */
async function checkServesDist(base: string) {
  const want = readFileSync(path.join(distDir, "index.html"), "utf8");
  const res = await fetch(`${base}/`);
  const got = await res.text();
  if (!res.ok || got !== want) {
    throw new Error(`${base}/ does not serve web/dist/index.html (HTTP ${res.status}):\n${got.slice(0, 500)}`);
  }
}

/** hashTree is a digest of every file's path and content under dir ("" when it does not exist). */
function hashTree(dir: string): string {
  if (!existsSync(dir)) return "";
  const h = createHash("sha256");
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        h.update(`${path.relative(dir, p)}\0`);
        h.update(readFileSync(p));
      }
    }
  };
  walk(dir);
  return h.digest("hex");
}

/** run runs a command to completion, its output in web/test-results/<name>.log; it throws with the output's end on failure. */
async function run(name: string, cmd: string, args: string[], cwd: string) {
  const p = start(name, cmd, args, cwd, {});
  const code = await p.exitCode;
  await p.stop();
  if (code !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed with exit code ${code}:\n${p.output().slice(-4000)}`);
  }
}

interface Proc {
  logFile: string;
  output: () => string;
  exited: () => boolean;
  exitCode: Promise<number | null>;
  stop: () => Promise<void>;
}

function start(name: string, cmd: string, args: string[], cwd: string, env: Record<string, string>): Proc {
  const logFile = path.join(logDir, `${name}.log`);
  const log = createWriteStream(logFile);
  // Its own process group, so that stopping it also stops what it started.
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
    out += d.toString();
    // Keep the start (how it came up) and the recent end.
    if (out.length > 400_000) out = out.slice(0, 100_000) + "\n[…]\n" + out.slice(-200_000);
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  const exitCode = new Promise<number | null>((resolve) => {
    child.on("exit", (code) => ((exited = true), resolve(code)));
    child.on("error", (err) => {
      out += `\n${cmd}: ${err.message}\n`;
      exited = true;
      resolve(-1);
    });
  });
  const closeLog = () => new Promise<void>((resolve) => (log.writableEnded ? resolve() : log.end(resolve)));
  return {
    logFile,
    output: () => out,
    exited: () => exited,
    exitCode,
    stop: async () => {
      if (!exited && child.pid !== undefined) {
        try {
          process.kill(-child.pid, "SIGTERM");
        } catch {
          /* gone */
        }
        const ended = await Promise.race([exitCode.then(() => true), sleep(30_000).then(() => false)]);
        if (!ended) {
          try {
            process.kill(-child.pid, "SIGKILL");
          } catch {
            /* gone */
          }
        }
      }
      await closeLog();
    },
  };
}

async function waitFor(url: string, proc: Proc, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (proc.exited()) throw new Error(`the server exited before ${url} answered (${proc.logFile}):\n${proc.output().slice(-4000)}`);
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      /* not yet */
    }
    await sleep(250);
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms (${proc.logFile}):\n${proc.output().slice(-4000)}`);
}

/** servingURL waits for the server's "convo is serving" log line and returns the URL it names. */
async function servingURL(proc: Proc, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const m = proc.output().match(/msg="convo is serving" url=(http:\/\/[^\s]+)/);
    if (m) return m[1];
    if (proc.exited()) throw new Error(`the server exited before it served (${proc.logFile}):\n${proc.output().slice(-4000)}`);
    await sleep(100);
  }
  throw new Error(`the server did not log its URL within ${timeoutMs} ms (${proc.logFile}):\n${proc.output().slice(-4000)}`);
}

function sleep(ms: number) {
  return new Promise((r) => setTimeout(r, ms));
}
