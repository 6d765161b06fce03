import { describe, expect, it } from "vitest";
import { LOCAL_USER, tokenSubject } from "../api/auth";
import { initials, mayTakeBack, others, senderName, typingLine } from "./people";

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
const jwt = (payload: unknown) => `${b64url({ alg: "HS256" })}.${b64url(payload)}.sig`;

describe("people", () => {
  it("takes the caller from the token's sub, local without a token, null for a token that is no JWT", () => {
    expect(tokenSubject(jwt({ sub: "alice", exp: 1 }))).toBe("alice");
    expect(tokenSubject(jwt({ sub: "zoë ü?>" }))).toBe("zoë ü?>"); // UTF-8
    expect(tokenSubject(null)).toBe(LOCAL_USER);
    expect(tokenSubject("opaque-token")).toBeNull();
    expect(tokenSubject(jwt({ exp: 1 }))).toBeNull();
    expect(tokenSubject("a.%%%.c")).toBeNull();
  });

  it("names the sender: You for the caller's own, the id for another's, the owner for a message without one", () => {
    expect(senderName({ senderId: "alice" }, "alice", "owner")).toBe("You");
    expect(senderName({ senderId: "bob" }, "alice", "owner")).toBe("bob");
    expect(senderName({}, "alice", "owner")).toBe("You");
    expect(senderName({}, "bob", "participant")).toBe("Owner");
    expect(senderName({ senderId: "bob" }, null, "participant")).toBe("bob");
  });

  it("leaves the caller out of presence and typing, and says who types", () => {
    expect(others(["alice", "bob"], "alice")).toEqual(["bob"]);
    expect(typingLine([])).toBe("");
    expect(typingLine(["bob"])).toBe("bob is typing…");
    expect(typingLine(["bob", "carol"])).toBe("bob and carol are typing…");
    expect(typingLine(["a", "b", "c"])).toBe("3 people are typing…");
    expect(initials("alice.smith")).toBe("AS");
    expect(initials("bob")).toBe("B");
    expect(initials("ü-zed")).toBe("ÜZ");
    expect(initials("…")).toBe("…");
  });

  it("lets the sender or the owner take a queued message back, never a viewer", () => {
    const q = { role: "user", queued: true, senderId: "bob" };
    expect(mayTakeBack(q, "bob", "participant")).toBe(true);
    expect(mayTakeBack(q, "carol", "participant")).toBe(false);
    expect(mayTakeBack(q, "alice", "owner")).toBe(true);
    expect(mayTakeBack(q, "bob", "viewer")).toBe(false);
    expect(mayTakeBack({ ...q, queued: false }, "bob", "participant")).toBe(false);
    expect(mayTakeBack({ ...q, role: "assistant" }, "alice", "owner")).toBe(false);
  });
});
