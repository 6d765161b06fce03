// A page built with the AI SDK's useChat, pointed at convo's /v1/ai-sdk/
// endpoints: the browser test's fixture (aisdk.spec.ts), and the example
// docs/protocols.md shows. The chat id (a conversation id) is the ?chat=
// query parameter. A tool call waiting for approval shows Approve and Deny;
// the answer goes back with the next request (sendAutomaticallyWhen).
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from "ai";
import { useState } from "react";
import { createRoot } from "react-dom/client";

const api = "/v1/ai-sdk/chat";

function Chat({ id, initial }: { id: string; initial: UIMessage[] }) {
  const { messages, sendMessage, status, stop, addToolApprovalResponse } = useChat({
    id,
    messages: initial,
    resume: true, // GET /v1/ai-sdk/chat/{id}/stream on load
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    transport: new DefaultChatTransport({
      api,
      // convo keeps the conversation: send only the new message.
      prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
        body: { id, messages: messages.slice(-1), trigger, messageId },
      }),
    }),
  });
  const [input, setInput] = useState("");
  const [files, setFiles] = useState<FileList | undefined>(undefined);
  // stop() only drops this tab's response; the stop endpoint ends the reply.
  const stopReply = async () => {
    await fetch(`${api}/${id}/stop`, { method: "POST" });
    await stop();
  };
  return (
    <main>
      <output data-status={status}>{status}</output>
      {messages.map((m) => (
        <article key={m.id} data-role={m.role} data-id={m.id}>
          {m.parts.map((p, i) =>
            p.type === "text" ? (
              <p key={i} className="text" style={{ whiteSpace: "pre-wrap" }}>
                {p.text}
              </p>
            ) : p.type === "reasoning" ? (
              <details key={i} className="reasoning">
                <summary>reasoning</summary>
                {p.text}
              </details>
            ) : p.type === "dynamic-tool" && p.state === "approval-requested" ? (
              <fieldset key={i} className="approval" aria-label="Approval requested">
                <legend>
                  {p.toolName}: {p.approval.requestReason ?? "approve?"}
                </legend>
                <button type="button" onClick={() => void addToolApprovalResponse({ id: p.approval.id, approved: true })}>
                  Approve
                </button>
                <button type="button" onClick={() => void addToolApprovalResponse({ id: p.approval.id, approved: false })}>
                  Deny
                </button>
              </fieldset>
            ) : p.type === "file" && p.mediaType.startsWith("image/") ? (
              <img key={i} className="file" src={p.url} alt={p.filename ?? "image"} />
            ) : p.type === "file" ? (
              <a key={i} className="file" href={p.url}>
                {p.filename ?? "file"}
              </a>
            ) : p.type === "dynamic-tool" ? (
              <p key={i} className="tool" data-state={p.state}>
                {p.toolName}: {p.state === "output-available" ? String(p.output) : p.state}
              </p>
            ) : null,
          )}
        </article>
      ))}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          // Files go as data URLs: convo stores them and serves them back
          // with its own URLs.
          void sendMessage({ text: input, files });
          setInput("");
          setFiles(undefined);
          e.currentTarget.reset();
        }}
      >
        <input aria-label="Message" value={input} onChange={(e) => setInput(e.target.value)} />
        <input aria-label="Attach" type="file" multiple onChange={(e) => setFiles(e.target.files ?? undefined)} />
        <button type="submit">Send</button>
        <button type="button" onClick={() => void stopReply()}>
          Stop
        </button>
      </form>
    </main>
  );
}

async function main() {
  const id = new URLSearchParams(location.search).get("chat") ?? crypto.randomUUID();
  // A chat convo does not know yet (404) starts empty.
  const res = await fetch(`${api}/${id}/messages`);
  const initial: UIMessage[] = res.ok ? await res.json() : [];
  createRoot(document.getElementById("root")!).render(<Chat id={id} initial={initial} />);
}

void main();
