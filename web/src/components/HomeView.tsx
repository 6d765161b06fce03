import { useEffect, useState, type ReactNode } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import { conversationPath, navigate } from "../router";
import { Composer, type SendOptions } from "./Composer";
import { sendRequest } from "./ConversationView";
import { DemoIntro, useDemoModel } from "./DemoIntro";
import { useUploads } from "@convo/react";
import { useFileDrop } from "./Attachments";

/** HomeView is a new, empty conversation: the first message creates it. */
export function HomeView({ client, onChanged, header }: { client: ConvoClient; onChanged: () => void; header?: ReactNode }) {
  const [error, setError] = useState<string | null>(null);
  const demo = useDemoModel(client);
  const uploads = useUploads(client);
  const drop = useFileDrop(uploads.add);
  useEffect(() => {
    document.title = "convo";
  }, []);

  const send = async (o: SendOptions) => {
    setError(null);
    try {
      const res = await client.sendMessage(sendRequest("", o));
      onChanged();
      navigate(conversationPath(res.conversationId));
      return true;
    } catch (err) {
      setError(errorMessage(err));
      return false;
    }
  };

  return (
    <main className={`main${drop.dragging ? " is-dropping" : ""}`} {...drop.handlers}>
      <header className="main-head">
        {header}
        <h1 className="title">New conversation</h1>
      </header>
      <div className="messages">
        <div className="messages-inner empty">
          <h2 className="hello">What can I help with?</h2>
          <p className="muted">Replies stream in live; reload, or open a second tab, and nothing is lost.</p>
          <DemoIntro demo={demo} />
        </div>
      </div>
      {error ? (
        <p className="composer-error" role="alert">
          {error}
        </p>
      ) : null}
      <Composer onSend={send} onStop={() => {}} running={false} autoFocus uploads={uploads} />
    </main>
  );
}
