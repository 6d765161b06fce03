import { describe, expect, it } from "vitest";
import { conversationPath, parseRoute, sharePath, shareURL } from "./router";

describe("parseRoute", () => {
  it("reads a share link's page", () => {
    expect(parseRoute("/s/Xy3-_abc")).toEqual({ name: "share", token: "Xy3-_abc" });
    expect(parseRoute("/s/Xy3-_abc/")).toEqual({ name: "share", token: "Xy3-_abc" });
    expect(parseRoute("/s/a%2Fb")).toEqual({ name: "share", token: "a/b" });
  });

  it("opens home for a share path without a token, with more segments, or badly encoded", () => {
    expect(parseRoute("/s/")).toEqual({ name: "home" });
    expect(parseRoute("/s")).toEqual({ name: "home" });
    expect(parseRoute("/s/a/b")).toEqual({ name: "home" });
    expect(parseRoute("/s/%E0%A4%A")).toEqual({ name: "home" });
  });

  it("still reads conversations and home", () => {
    expect(parseRoute("/c/abc", "?m=m1")).toEqual({ name: "conversation", id: "abc", messageId: "m1" });
    expect(parseRoute("/")).toEqual({ name: "home" });
  });
});

describe("share links", () => {
  it("sharePath and parseRoute round-trip any token", () => {
    for (const token of ["Xy3-_abc", "a/b?c#d", "ümlaut token"]) {
      expect(parseRoute(sharePath(token))).toEqual({ name: "share", token });
    }
  });

  it("shareURL is the origin's /s/<token>", () => {
    expect(shareURL("https://chat.example.com", "tok")).toBe("https://chat.example.com/s/tok");
    expect(shareURL("http://127.0.0.1:8080/", "tok")).toBe("http://127.0.0.1:8080/s/tok");
    expect(conversationPath("c1")).toBe("/c/c1");
  });
});
