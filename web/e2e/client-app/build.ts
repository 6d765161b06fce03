// Builds the example app of docs/client.md (its `tsx example` code block,
// with clients/example/index.html) the way a user would: outside the repo, with @convo/client and @convo/react installed
// from the tarballs `npm pack` makes (not linked from the workspace), type
// checked against their declarations, and bundled with vite. For
// client-app.spec.ts, which serves it on a second origin.
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "../../..");

/** exampleCode is the code block of docs/client.md marked `tsx example`: the app the test builds. */
export function exampleCode(): string {
  const doc = readFileSync(path.join(repo, "docs/client.md"), "utf8");
  const m = doc.match(/\n```tsx example\n([\s\S]*?)\n```\n/);
  if (!m) throw new Error("docs/client.md has no ```tsx example block: the example app the tests build");
  return m[1] + "\n";
}

/** The environment variable naming the built app's directory. */
export const clientAppEnv = "CONVO_E2E_CLIENT_APP";

/** run runs a command as a user would in a shell: without the npm_* settings of the npm run that started the tests. */
function run(cmd: string, args: string[], cwd: string): Promise<string> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_") && k !== "NODE_ENV"),
  );
  // Not spawnSync: global-setup builds the server and the fixtures at the
  // same time, and this build mostly waits (on npm's cache, tsc, vite).
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: { ...env, npm_config_loglevel: "error" }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", (err) => reject(new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed (${err}):\n${stdout}\n${stderr}`)));
    child.on("close", (code) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed (${code}):\n${stdout}\n${stderr}`));
    });
  });
}

/** buildClientApp returns the directory of the built app (its index.html and assets). */
export async function buildClientApp(): Promise<string> {
  const work = mkdtempSync(path.join(os.tmpdir(), "convo-e2e-client-app-"));
  const tarballs: Record<string, string> = {};
  for (const [name, dir] of [
    ["@convo/client", "clients/typescript"],
    ["@convo/react", "clients/react"],
  ]) {
    const out = (await run("npm", ["pack", "--silent", "--pack-destination", work], path.join(repo, dir))).trim().split("\n");
    tarballs[name] = `file:${path.join(work, out[out.length - 1])}`;
  }
  const app = path.join(work, "app");
  mkdirSync(app);
  cpSync(path.join(repo, "clients/example"), app, { recursive: true });
  mkdirSync(path.join(app, "src"), { recursive: true });
  writeFileSync(path.join(app, "src/main.tsx"), exampleCode());
  writeFileSync(
    path.join(app, "package.json"),
    JSON.stringify(
      {
        name: "convo-example-app",
        private: true,
        type: "module",
        dependencies: { ...tarballs, react: "19.3.1", "react-dom": "19.3.1" },
        devDependencies: {
          "@types/react": "19.3.0",
          "@types/react-dom": "19.3.0",
          "@vitejs/plugin-react": "6.3.0",
          typescript: "5.9.3",
          vite: "8.3.8",
        },
      },
      null,
      2,
    ),
  );
  writeFileSync(
    path.join(app, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2022", "DOM", "DOM.Iterable"],
        module: "ESNext",
        moduleResolution: "Bundler",
        jsx: "react-jsx",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
      },
      include: ["src"],
    }),
  );
  writeFileSync(
    path.join(app, "vite.config.js"),
    'import react from "@vitejs/plugin-react";\nexport default { plugins: [react()], base: "./" };\n',
  );
  await run("npm", ["install", "--include=dev", "--no-audit", "--no-fund", "--prefer-offline"], app);
  await run(path.join(app, "node_modules/.bin/tsc"), ["--noEmit", "-p", "."], app);
  await run(path.join(app, "node_modules/.bin/vite"), ["build", "--logLevel", "warn"], app);
  const dist = path.join(app, "dist");
  process.env[clientAppEnv] = dist;
  return work;
}
