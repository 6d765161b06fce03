// What counts as empty text where the user writes a message (docs/api.md
// "Text"): the editor's Save and the composer's Send follow the server's
// rule, so that text of zero-width or bidi control characters is never
// sent to be refused.

import { readFileSync } from "node:fs";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { invisibleRanges } from "@convo/client";
import { Composer } from "./Composer";
import { MessageEditor } from "./MessageEditor";

/** Whether the editor's Save button is aria-disabled, for a draft of text. */
const saveDisabled = (text: string, writing = false) => {
  const html = renderToStaticMarkup(
    <MessageEditor messageId="u1" text={text} writing={writing} onSave={async () => true} onCancel={() => {}} />,
  );
  const save = /<button type="submit"[^>]*aria-disabled="(true|false)"[^>]*>Save</.exec(html);
  expect(save, html).not.toBeNull();
  return save![1] === "true";
};

describe("the rule of empty text", () => {
  it("is the database's: showsSomething's set is convo._invisible, which the server's Go check agrees with", () => {
    const sql = readFileSync(new URL("../../../db/functions/client_conversations.sql", import.meta.url), "utf8");
    const m = /FUNCTION convo\._invisible\(\)[\s\S]*?SELECT '([^']*)'::text/.exec(sql);
    expect(m, "convo._invisible in db/functions/client_conversations.sql").not.toBeNull();
    expect(invisibleRanges).toBe(m![1]);
  });
});

describe("MessageEditor", () => {
  it("disables Save for text that shows nothing: zero-width, bidi controls, whitespace", () => {
    for (const t of ["", "   ", "\u200b", "\u200b\u200c\u200d\u2060\ufeff", " \u200e\u202e\n", "\u3164", "\u2800\u2800"]) {
      expect(saveDisabled(t), JSON.stringify(t)).toBe(true);
    }
  });

  it("enables Save once one character shows something, unless a reply is being written", () => {
    for (const t of ["ok", "\u200bok", "👍"]) expect(saveDisabled(t), JSON.stringify(t)).toBe(false);
    expect(saveDisabled("ok", true)).toBe(true);
  });
});

describe("Composer", () => {
  it("starts with Send disabled", () => {
    const html = renderToStaticMarkup(<Composer onSend={async () => true} onStop={() => {}} running={false} />);
    expect(html).toMatch(/<button type="submit" class="primary" disabled=""[^>]*aria-label="Send"/);
  });
});
