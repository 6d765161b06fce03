import { useEffect, useState } from "react";
import { errorMessage, type ConvoClient } from "../api/client";
import type { SearchResult } from "@convo/client";
import { conversationPath } from "../router";
import { Highlighted } from "./Highlighted";
import type { Go } from "./Sidebar";
import { Spinner } from "./Spinner";

/** SearchResults: the messages matching the sidebar's query, each a link to it in its conversation. */
export function SearchResults({ client, query, go }: { client: ConvoClient; query: string; go: Go }) {
  const [results, setResults] = useState<SearchResult[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    const t = setTimeout(() => {
      client
        .searchMessages({ query, pageSize: 20 })
        .then((res) => {
          if (cancelled) return;
          setResults(res.results);
          setError(null);
        })
        .catch((err) => {
          if (cancelled) return;
          setError(errorMessage(err));
          setResults([]);
        });
    }, 250);
    return () => {
      cancelled = true;
      clearTimeout(t);
    };
  }, [client, query]);

  return (
    <div className="search-results" aria-live="polite">
      {results === null ? (
        <p className="muted pad">
          <Spinner /> Searching…
        </p>
      ) : null}
      {error ? (
        <p className="message-error pad" role="alert">
          {error}
        </p>
      ) : null}
      {results !== null && results.length === 0 && !error ? <p className="muted pad">No messages match.</p> : null}
      {results && results.length > 0 ? (
        <ul className="result-list" aria-label="Search results">
          {results.map((r) => {
            const path = conversationPath(r.conversationId, r.messageId);
            return (
              <li key={r.messageId}>
                <a href={path} className="result" onClick={go(path)}>
                  <span className="result-title">
                    {r.conversationTitle || "Untitled"}
                    <span className="muted small"> · {r.role === "user" ? "you" : r.role}</span>
                  </span>
                  <span className="result-snippet">
                    <Highlighted text={r.snippet} ranges={r.highlights} />
                  </span>
                </a>
              </li>
            );
          })}
        </ul>
      ) : null}
    </div>
  );
}
