// Builds the example app of docs/client.md (its `tsx example` code block,
// with clients/example/index.html) the way a user would: outside the repo, with @convo/client and @convo/react installed
// from the tarballs `npm pack` makes (not linked from the workspace), type
// checked against their declarations, and bundled with vite. For
// client-app.spec.ts, which serves it on a second origin.
import { spawnSync } from "node:child_process";
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
function run(cmd: string, args: string[], cwd: string): string {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_") && k !== "NODE_ENV"),
  );
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", env: { ...env, npm_config_loglevel: "error" } });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed (${r.error ?? r.status}):\n${r.stdout}\n${r.stderr}`);
  }
  return r.stdout;
}

/** buildClientApp returns the directory of the built app (its index.html and assets). */
export function buildClientApp(): string {
  const work = mkdtempSync(path.join(os.tmpdir(), "convo-e2e-client-app-"));
  const tarballs: Record<string, string> = {};
  for (const [name, dir] of [
    ["@convo/client", "clients/typescript"],
    ["@convo/react", "clients/react"],
  ]) {
    const out = run("npm", ["pack", "--silent", "--pack-destination", work], path.join(repo, dir)).trim().split("\n");
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
  run("npm", ["install", "--include=dev", "--no-audit", "--no-fund", "--prefer-offline"], app);
  run(path.join(app, "node_modules/.bin/tsc"), ["--noEmit", "-p", "."], app);
  run(path.join(app, "node_modules/.bin/vite"), ["build", "--logLevel", "warn"], app);
  const dist = path.join(app, "dist");
  process.env[clientAppEnv] = dist;
  return work;
}
