// Plain, immutable view-model types for one conversation, and their
// conversion from the generated protobuf messages. The reducer and the
// components work with these, never with protobuf messages directly, so that
// state can be compared structurally in tests and rendered without
// protobuf-specific knowledge.

import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema, timestampMs, type Timestamp, type Value } from "@bufbuild/protobuf/wkt";
import { Rating } from "./gen/convo/v1/types_pb.js";
import type {
  Block,
  Conversation,
  Feedback,
  File,
  InputRequest,
  Message,
  ToolCall,
} from "./gen/convo/v1/types_pb.js";

export interface ConversationInfo {
  id: string;
  title: string;
  activePromptId: string;
  createdAt?: number;
  updatedAt?: number;
  lastMessageAt?: number;
  /**
   * The caller's role in it: "owner", "participant" or "viewer" (absent
   * from a server before members). Events carry none: the fold keeps the
   * one the snapshot gave.
   */
  role?: string;
}

export interface FeedbackInfo {
  rating: Rating;
  comment: string;
}

export interface MessageState {
  id: string;
  role: string;
  /** pending | processing | completed | failed | cancelled */
  status: string;
  promptId: string;
  createdAt?: number;
  updatedAt?: number;
  feedback?: FeedbackInfo;
  comparisonId: string;
  comparisonSlot: string;
  /**
   * The message it follows in the conversation's tree ("" for a first
   * message): a reply's is the user message it answers (docs/branches.md).
   */
  parentId: string;
  /** How many versions its turn has (at least 1; a comparison's two replies count once). */
  siblingCount: number;
  /** Which version it is, from 0, in the order they were made: "‹ siblingIndex+1 / siblingCount ›". */
  siblingIndex: number;
  /**
   * Why a failed reply failed: its prompt's error, as the server stored
   * it ("" unless status is "failed"). Snapshots, pages, branchSwitched
   * and messageUpdated carry it, and promptFailed sets it.
   */
  error: string;
  /**
   * Who sent a user message (a user id; absent on messages sent before
   * conversations had members, which are the owner's).
   */
  senderId?: string;
  /**
   * true on a user message sent while a reply was in flight, and on its
   * pending reply, until its turn comes (a messageUpdated clears it).
   */
  queued?: boolean;
  /** The message's blocks, in order. */
  blockIds: string[];
}

export interface ToolCallState {
  id: string;
  blockId: string;
  name: string;
  /** started | running | completed | failed */
  status: string;
  input?: JsonValue;
  output: string;
  error: string;
  startedAt?: number;
  endedAt?: number;
}

export interface BlockState {
  id: string;
  messageId: string;
  blockType: string;
  content: string;
  metadata: JsonObject;
  /** streaming | completed */
  status: string;
  /** The block's place in its message (Block.position, BlockStart.position). */
  position: number;
  toolCall?: ToolCallState;
  /** A "file" block's file (a user message's attachment). */
  file?: FileState;
}

/**
 * A file a message holds (a "file" block's Block.file). url is signed and
 * expires (urlExpiresAt): every snapshot brings a fresh one, which
 * replaces it.
 */
export interface FileState {
  id: string;
  filename: string;
  mediaType: string;
  size: number;
  sha256: string;
  /** The signed URL of its content, relative to the server ("" when the server signs none). */
  url: string;
  urlExpiresAt?: number;
}

export function fileState(f: File): FileState {
  return {
    id: f.id,
    filename: f.filename,
    mediaType: f.mediaType,
    size: Number(f.size),
    sha256: f.sha256,
    url: f.url,
    urlExpiresAt: tsMs(f.urlExpiresAt),
  };
}

/**
 * An open input request (a pause, docs/events.md "Pauses"): a tool call
 * that waits for an approval, a client tool's result, or the answer to a
 * question.
 */
export interface InputRequestState {
  toolCallId: string;
  promptId: string;
  /** approval | client_tool | question */
  kind: string;
  /**
   * What is asked: an approval {} or {"message": text}; a client tool {} or
   * {"outputSchema": …}; a question {"question": text, "choices": [text, …]}.
   */
  request: JsonObject;
  /** The tab (claimant) that claimed a client tool's run, "" when none. */
  claimedBy: string;
  /** When that claim lapses unless renewed (ms since the epoch). */
  claimExpiresAt?: number;
  /** When the request expires, if it does. */
  expiresAt?: number;
  createdAt?: number;
}

export function inputRequestState(r: InputRequest): InputRequestState {
  return {
    toolCallId: r.toolCallId,
    promptId: r.promptId,
    kind: r.kind,
    request: r.request ?? {},
    claimedBy: r.claimedBy,
    claimExpiresAt: tsMs(r.claimExpiresAt),
    expiresAt: tsMs(r.expiresAt),
    createdAt: tsMs(r.createdAt),
  };
}

export function tsMs(ts: Timestamp | undefined): number | undefined {
  return ts ? timestampMs(ts) : undefined;
}

export function valueToJson(v: Value | undefined): JsonValue | undefined {
  return v ? toJson(ValueSchema, v) : undefined;
}

export function conversationInfo(c: Conversation): ConversationInfo {
  return {
    id: c.id,
    title: c.title,
    activePromptId: c.activePromptId,
    createdAt: tsMs(c.createdAt),
    updatedAt: tsMs(c.updatedAt),
    lastMessageAt: tsMs(c.lastMessageAt),
    ...(c.role ? { role: c.role } : {}),
  };
}

export function feedbackInfo(f: Feedback | undefined): FeedbackInfo | undefined {
  if (!f || f.rating === Rating.UNSPECIFIED) return undefined;
  return { rating: f.rating, comment: f.comment };
}

/** messageFields converts a message's own fields; blocks are handled apart. */
export function messageFields(m: Message): Omit<MessageState, "blockIds"> {
  return {
    id: m.id,
    role: m.role,
    status: m.status,
    promptId: m.promptId,
    createdAt: tsMs(m.createdAt),
    updatedAt: tsMs(m.updatedAt),
    feedback: feedbackInfo(m.feedback),
    comparisonId: m.comparisonId,
    comparisonSlot: m.comparisonSlot,
    parentId: m.parentId,
    // A server before trees leaves it out: one version.
    siblingCount: Math.max(1, m.siblingCount),
    siblingIndex: m.siblingIndex,
    error: m.error,
    ...(m.senderId ? { senderId: m.senderId } : {}),
    ...(m.queued ? { queued: true } : {}),
  };
}

export function toolCallState(t: ToolCall, input?: Value): ToolCallState {
  return {
    id: t.id,
    blockId: t.blockId,
    name: t.name,
    status: t.status,
    input: valueToJson(input ?? t.input),
    output: t.output,
    error: t.error,
    startedAt: tsMs(t.startedAt),
    endedAt: tsMs(t.endedAt),
  };
}

export function blockState(b: Block, messageId: string): BlockState {
  return {
    id: b.id,
    messageId,
    blockType: b.blockType,
    content: b.content,
    metadata: b.metadata ?? {},
    status: b.status || "completed",
    position: b.position,
    toolCall: b.toolCall ? toolCallState(b.toolCall) : undefined,
    file: b.file ? fileState(b.file) : undefined,
  };
}
