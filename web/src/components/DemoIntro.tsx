import { useEffect, useState } from "react";
import type { ConvoClient } from "../api/client";

/**
 * demoCommands are the commands convo's demo model pauses on (a message
 * that starts with one; worker/demo, docs/workers.md "Pauses"), each with
 * what it does.
 */
export const demoCommands: readonly { command: string; example: string; does: string }[] = [
  {
    command: "/approve",
    example: "/approve a note about the tides",
    does: "asks you to approve publishing your message as a note; Approve runs the tool, Deny does not.",
  },
  {
    command: "/ask",
    example: "/ask which fruit should I eat?",
    does: "asks you a question made from your message (choices, or your own words) and answers with what you say.",
  },
  {
    command: "/client-tool",
    example: "/client-tool",
    does: "has your browser run a tool (its time, time zone and language) and send the result back to the reply.",
  },
];

/**
 * DemoIntro says where replies come from, as the server says
 * (GetServerInfo's demo_model): with demo true, convo's built-in demo
 * model, with its commands; with false, the workers serving the server,
 * and nothing about a demo; with null (not known yet, or the server did
 * not say), nothing.
 */
export function DemoIntro({ demo }: { demo: boolean | null }) {
  if (demo === null) return null;
  if (!demo) {
    return (
      <section className="demo-intro" aria-label="Where replies come from">
        <p>Replies come from the workers serving this server.</p>
      </section>
    );
  }
  return (
    <section className="demo-intro" aria-label="About the demo model">
      <p>
        Replies come from the built-in <strong>demo model</strong> (no key, no network). It answers any message, does
        arithmetic with a calculator tool, and pauses for you when a message starts with a command:
      </p>
      <dl className="demo-commands">
        {demoCommands.map((c) => (
          <div key={c.command}>
            <dt>
              <code>{c.command}</code>
            </dt>
            <dd>
              {c.does} <span className="muted">Try: </span>
              <code>{c.example}</code>
            </dd>
          </div>
        ))}
      </dl>
    </section>
  );
}

/**
 * useDemoModel asks the server once whether its replies come from the
 * demo model (GetServerInfo): null until it answers, and when the call
 * fails (the intro then claims nothing).
 */
export function useDemoModel(client: ConvoClient): boolean | null {
  const [demo, setDemo] = useState<boolean | null>(null);
  useEffect(() => {
    let live = true;
    client.getServerInfo({}).then(
      (res) => live && setDemo(res.demoModel),
      () => live && setDemo(null),
    );
    return () => {
      live = false;
    };
  }, [client]);
  return demo;
}
