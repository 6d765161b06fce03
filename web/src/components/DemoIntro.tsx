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
 * DemoIntro says where replies come from and lists the demo model's
 * commands. The app cannot tell which worker will answer (the server's
 * own, or one outside it), so it says when the demo model is the one: a
 * server running its own workers with no OpenAI provider configured.
 */
export function DemoIntro() {
  return (
    <section className="demo-intro" aria-label="About the demo model">
      <p>
        Replies come from the workers serving this server. With its own workers and no OpenAI key or URL set (
        <code>make run</code> as it comes), that is convo&apos;s built-in <strong>demo model</strong>: no API key, no
        network. It answers any message, does arithmetic with a calculator tool, and pauses for you when a message starts
        with a command:
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
