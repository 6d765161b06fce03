import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { takeTokenFromUrl } from "./api/auth";
import { useTransport } from "./api/client";
import { App } from "./App";
// The styles by area, in cascade order.
import "./styles/base.css";
import "./styles/controls.css";
import "./styles/layout.css";
import "./styles/connection.css";
import "./styles/messages.css";
import "./styles/blocks.css";
import "./styles/comparisons.css";
import "./styles/composer.css";
import "./styles/attachments.css";
import "./styles/dialogs.css";
import "./styles/people.css";
import "./styles/shares.css";
import "./styles/token-screen.css";
import "./styles/narrow.css";

async function start() {
  // `vite --mode mock` talks to an in-page mock instead of a server; a
  // production build has no trace of it.
  if (import.meta.env.MODE === "mock") {
    const { mockTransport } = await import("../dev/mock");
    useTransport(mockTransport());
  }
  // A link may carry a token (#token=…): keep it, and take it out of the URL.
  takeTokenFromUrl();
  window.addEventListener("hashchange", () => takeTokenFromUrl());
  createRoot(document.getElementById("root")!).render(
    <StrictMode>
      <App />
    </StrictMode>,
  );
}

void start();
