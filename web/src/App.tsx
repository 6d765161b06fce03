import { useCallback, useEffect, useMemo, useState, useSyncExternalStore } from "react";
import { auth } from "./api/auth";
import { createConvoClient } from "./api/client";
import { ConversationView } from "./components/ConversationView";
import { HomeView } from "./components/HomeView";
import { SharedPage } from "./components/SharedView";
import { Sidebar } from "./components/Sidebar";
import { TokenScreen } from "./components/TokenScreen";
import { ConvoProvider, useConversationList } from "@convo/react";
import { useRoute } from "./router";

export function App() {
  const a = useSyncExternalStore(auth.subscribe, auth.get);
  const route = useRoute();
  // A share link's page needs no sign-in: it asks for a token only to continue the conversation.
  if (route.name === "share") {
    return <SharedPage key={`${route.token}\n${a.token ?? ""}`} token={route.token} needsSignIn={a.required && !a.token} />;
  }
  if (a.required && !a.token) return <TokenScreen />;
  // A new token starts everything over: new client, new streams.
  return <Shell key={a.token ?? ""} signedIn={a.token !== null} />;
}

function Shell({ signedIn }: { signedIn: boolean }) {
  const client = useMemo(() => createConvoClient(), []);
  const route = useRoute();
  const list = useConversationList(client);
  const [drawer, setDrawer] = useState(false);
  const closeDrawer = useCallback(() => setDrawer(false), []);
  const onChanged = list.refresh;

  useEffect(() => {
    if (!drawer) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") setDrawer(false);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [drawer]);

  const menu = (
    <button
      type="button"
      className="icon-button menu-button"
      aria-label="Show conversations"
      aria-expanded={drawer}
      aria-controls="sidebar"
      onClick={() => setDrawer((d) => !d)}
    >
      <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true">
        <path d="M3 6h18v2H3zm0 5h18v2H3zm0 5h18v2H3z" />
      </svg>
    </button>
  );

  const currentId = route.name === "conversation" ? route.id : undefined;
  return (
    <ConvoProvider client={client}>
    <div className={`app${drawer ? " drawer-open" : ""}`}>
      <div id="sidebar" className="sidebar-slot">
        <Sidebar client={client} list={list} currentId={currentId} onNavigate={closeDrawer} signedIn={signedIn} />
      </div>
      {drawer ? <div className="scrim" onClick={closeDrawer} aria-hidden="true" /> : null}
      {route.name === "conversation" ? (
        <ConversationView
          key={route.id}
          client={client}
          conversationId={route.id}
          focusMessageId={route.messageId}
          onChanged={onChanged}
          header={menu}
        />
      ) : (
        <HomeView client={client} onChanged={onChanged} header={menu} />
      )}
    </div>
    </ConvoProvider>
  );
}
