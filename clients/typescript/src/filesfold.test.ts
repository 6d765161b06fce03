import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { EventSchema } from "./gen/convo/v1/events_pb.js";
import { MessageSchema } from "./gen/convo/v1/types_pb.js";
import { initialState, messageBlocks, messageFiles, reduce } from "./fold.js";

const fileId = "0f0c6a1e-1d1b-4c55-9d1c-5a0a3f1f2b11";

/** userMessage is a message of text and one file, as the server sends it, the file's url signed to expire at exp. */
function userMessage(exp: number): MessageInitShape<typeof MessageSchema> {
  return {
    id: "m1",
    role: "user",
    status: "completed",
    blocks: [
      { id: "b0", blockType: "text", content: "look", status: "completed", position: 0 },
      {
        id: "b1",
        blockType: "file",
        status: "completed",
        position: 1,
        metadata: { fileId, filename: "cat.png", mediaType: "image/png", size: 5, sha256: "ab" },
        file: {
          id: fileId,
          filename: "cat.png",
          mediaType: "image/png",
          size: 5n,
          sha256: "ab",
          url: `/v1/files/${fileId}/content?exp=${exp}&sig=s${exp}`,
          urlExpiresAt: timestampFromMs(exp * 1000),
        },
      },
    ],
  };
}

const file = (exp: number) => ({
  id: fileId,
  filename: "cat.png",
  mediaType: "image/png",
  size: 5,
  sha256: "ab",
  url: `/v1/files/${fileId}/content?exp=${exp}&sig=s${exp}`,
  urlExpiresAt: exp * 1000,
});

describe("file blocks", () => {
  it("keep their file, with its url, from a live messageCreated", () => {
    const s0 = reduce(initialState("c1"), { type: "snapshot", snapshot: { messages: [], seq: 1n } });
    const s = reduce(s0, {
      type: "event",
      event: create(EventSchema, { seq: 2n, kind: { case: "messageCreated", value: { message: userMessage(100) } } }),
    });
    expect(messageBlocks(s, "m1").map((b) => b.blockType)).toEqual(["text", "file"]);
    expect(messageFiles(s, "m1")).toEqual([file(100)]);
  });

  it("take the url of a later snapshot, which replaces the old one", () => {
    const snap = (exp: number, seq: bigint) => ({ messages: [create(MessageSchema, userMessage(exp))], seq });
    const s1 = reduce(initialState("c1"), { type: "snapshot", snapshot: snap(100, 2n) });
    expect(messageFiles(s1, "m1")).toEqual([file(100)]);
    const s2 = reduce(s1, { type: "snapshot", snapshot: snap(4000, 2n) });
    expect(messageFiles(s2, "m1")).toEqual([file(4000)]);
    expect(messageFiles(s2, "m1")).toHaveLength(1);
  });

  it("a message without files has none", () => {
    const s = reduce(initialState("c1"), {
      type: "snapshot",
      snapshot: { messages: [create(MessageSchema, { id: "m2", role: "user", blocks: [{ id: "t", blockType: "text", content: "hi" }] })], seq: 1n },
    });
    expect(messageFiles(s, "m2")).toEqual([]);
    expect(messageBlocks(s, "m2")[0].file).toBeUndefined();
  });
});
