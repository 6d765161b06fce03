import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { takeTokenFromUrl } from "./api/auth";
import { useTransport } from "./api/client";
import { App } from "./App";
import "./styles.css";

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
