import { afterEach, describe, expect, it } from "vitest";
import { auth, takeTokenFromUrl } from "./auth";

function fakeLocation(url: string) {
  const u = new URL(url);
  const replaced: string[] = [];
  return {
    loc: { hash: u.hash, pathname: u.pathname, search: u.search } as Location,
    hist: { state: null, replaceState: (_s: unknown, _t: string, to: string) => replaced.push(to) } as unknown as History,
    replaced,
  };
}

describe("auth", () => {
  afterEach(() => auth.signOut());

  it("takes a token from the URL once and removes it from the URL", () => {
    const f = fakeLocation("https://convo.example/c/123?m=4#token=abc.def&x=1");
    takeTokenFromUrl(f.loc, f.hist);
    expect(auth.token()).toBe("abc.def");
    expect(f.replaced).toEqual(["/c/123?m=4#x=1"]);
  });

  it("leaves a URL without a token alone", () => {
    const f = fakeLocation("https://convo.example/c/123#section");
    takeTokenFromUrl(f.loc, f.hist);
    expect(auth.token()).toBeNull();
    expect(f.replaced).toEqual([]);
  });

  it("an Unauthenticated answer drops the token and asks for one; a new token clears that", () => {
    auth.setToken("old");
    auth.unauthenticated();
    expect(auth.get()).toEqual({ token: null, required: true });
    auth.setToken("new");
    expect(auth.get()).toEqual({ token: "new", required: false });
  });
});

describe("auth after a rejected new token", () => {
  it("goes back to the token screen again", () => {
    auth.unauthenticated();
    auth.setToken("still-bad");
    expect(auth.get().required).toBe(false);
    auth.unauthenticated();
    expect(auth.get()).toEqual({ token: null, required: true });
    auth.signOut();
  });
});
