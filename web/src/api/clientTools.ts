// The client tools this app runs for the model (useConversation's
// clientTools): each request runs exactly once across the tabs.

import type { ClientTool } from "@convo/react";

declare global {
  interface Window {
    /** How many times this page ran a client tool (the end-to-end tests sum it over tabs). */
    convoClientToolRuns?: number;
  }
}

/** browserInfo answers browser_info: the browser's clock, time zone and language. */
export const browserInfo: ClientTool = async () => {
  window.convoClientToolRuns = (window.convoClientToolRuns ?? 0) + 1;
  return {
    time: new Date().toISOString(),
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    language: navigator.language,
  };
};

export const clientTools: Readonly<Record<string, ClientTool>> = { browser_info: browserInfo };
