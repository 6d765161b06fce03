import { useState, type MouseEvent } from "react";
import { auth } from "../api/auth";
import type { ConvoClient } from "../api/client";
import type { ConversationList } from "@convo/react";
import { navigate } from "../router";
import { ConversationItems } from "./ConversationItems";
import { SearchResults } from "./SearchResults";

/** Sidebar: conversations newest first, new, rename, delete, and search across conversations. */
export function Sidebar({
  client,
  list,
  currentId,
  onNavigate,
  signedIn,
}: {
  client: ConvoClient;
  list: ConversationList;
  currentId?: string;
  onNavigate: () => void;
  signedIn: boolean;
}) {
  const [query, setQuery] = useState("");
  const go = (path: string) => (e: MouseEvent) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    navigate(path);
    onNavigate();
  };

  return (
    <nav className="sidebar" aria-label="Conversations">
      <div className="sidebar-head">
        <a href="/" className="brand" onClick={go("/")}>
          convo
        </a>
        <a href="/" className="button primary small" onClick={go("/")}>
          + New
        </a>
      </div>
      <div className="search">
        <label htmlFor="search-input" className="visually-hidden">
          Search messages
        </label>
        <input
          id="search-input"
          type="search"
          placeholder="Search messages…"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Escape") setQuery("");
          }}
        />
      </div>
      {query.trim() ? (
        <SearchResults client={client} query={query.trim()} go={go} />
      ) : (
        <ConversationItems client={client} list={list} currentId={currentId} go={go} />
      )}
      {signedIn ? (
        <div className="sidebar-foot">
          <button type="button" className="ghost small" onClick={() => auth.signOut()}>
            Sign out
          </button>
        </div>
      ) : null}
    </nav>
  );
}

/** Go follows a link of the sidebar in the app (plain clicks only) and closes the drawer. */
export type Go = (path: string) => (e: MouseEvent) => void;
