import type { ConvoClient } from "../api/client";
import type { ConversationList } from "@convo/react";
import { ConversationItem } from "./ConversationItem";
import type { Go } from "./Sidebar";
import { Spinner } from "./Spinner";

/** ConversationItems: the conversation list of the sidebar, newest first, with "Show more". */
export function ConversationItems({
  client,
  list,
  currentId,
  go,
}: {
  client: ConvoClient;
  list: ConversationList;
  currentId?: string;
  go: Go;
}) {
  if (!list.loaded) {
    return (
      <p className="muted pad">
        <Spinner /> Loading…
      </p>
    );
  }
  return (
    <div className="conv-list-wrap">
      {list.error ? (
        <p className="message-error pad" role="alert">
          {list.error}
        </p>
      ) : null}
      {list.items.length === 0 && !list.error ? <p className="muted pad">No conversations yet.</p> : null}
      <ul className="conv-list">
        {list.items.map((c) => (
          <ConversationItem key={c.id} client={client} c={c} current={c.id === currentId} list={list} go={go} />
        ))}
      </ul>
      {list.hasMore ? (
        <button type="button" className="ghost small more" onClick={list.loadMore}>
          Show more
        </button>
      ) : null}
    </div>
  );
}
