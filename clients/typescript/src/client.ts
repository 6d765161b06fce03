// The Connect client of ConversationService, and helpers for the calls an
// app makes, so that it never builds request messages by hand.

import { Code, ConnectError, createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import {
  ConversationService,
  Preference,
  type EditMessageResponse,
  type InputAnswerSchema,
  type RegenerateReplyResponse,
  type SendMessageResponse,
} from "./gen/convo/v1/conversation_service_pb.js";
import type { InputRequest } from "./gen/convo/v1/types_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Rating, SendPolicy, type ModelConfigSchema } from "./gen/convo/v1/types_pb.js";

/** ConvoClient is the generated connect-es client of ConversationService. */
export type ConvoClient = Client<typeof ConversationService>;

export interface ConvoOptions {
  /** Where convo answers, e.g. "https://api.example.com" (another origin needs CONVO_CORS_ORIGINS there). */
  baseUrl: string;
  /** Returns the bearer token for each call (null or "": none, as in single-user mode). */
  getToken?: () => string | null | undefined | Promise<string | null | undefined>;
  /** Called when the server refuses the credentials (Unauthenticated). */
  onUnauthenticated?: () => void;
  /** Replaces the HTTP transport (tests, a mock). */
  transport?: Transport;
}

/** The options each client was made with: uploadFile and getFile use its base URL and token. */
const clientOptions = new WeakMap<ConvoClient, ConvoOptions>();

/** optionsOf returns the options client was made with (undefined: not made by createConvoClient). */
export function optionsOf(client: ConvoClient): ConvoOptions | undefined {
  return clientOptions.get(client);
}

/** createConvoClient returns the generated client, with the token added to every call. */
export function createConvoClient(o: ConvoOptions): ConvoClient {
  const withAuth: Interceptor = (next) => async (req) => {
    const token = await o.getToken?.();
    if (token) req.header.set("Authorization", `Bearer ${token}`);
    try {
      return await next(req);
    } catch (err) {
      if (ConnectError.from(err).code === Code.Unauthenticated) o.onUnauthenticated?.();
      throw err;
    }
  };
  const transport = o.transport ?? createConnectTransport({ baseUrl: o.baseUrl, interceptors: [withAuth] });
  const client = createClient(ConversationService, transport);
  clientOptions.set(client, o);
  return client;
}

/** A model to ask for: a provider and a model name, or the worker's default when omitted. */
export interface ModelChoice {
  provider?: string;
  model?: string;
  temperature?: number;
  maxTokens?: number;
  systemPrompt?: string;
}

function modelConfig(m: ModelChoice | undefined): MessageInitShape<typeof ModelConfigSchema> | undefined {
  if (!m) return undefined;
  return {
    provider: m.provider ?? "",
    model: m.model ?? "",
    temperature: m.temperature,
    maxTokens: m.maxTokens,
    systemPrompt: m.systemPrompt ?? "",
  };
}

export interface SendOptions {
  /** The conversation to append to; omitted: a new one. */
  conversationId?: string;
  model?: ModelChoice;
  /** Makes it an A/B comparison: a second reply from this model. */
  compareModel?: ModelChoice;
  /**
   * The message the app shows as the conversation's active leaf, below
   * which the user wrote (activeLeaf(state)). When another tab or client
   * moved the conversation on meanwhile (switched branches, edited,
   * regenerated, sent), the server refuses the message with
   * FailedPrecondition (isLeafMoved) and writes nothing; omitted: no
   * check, the message hangs below whatever the active leaf is.
   */
  parentMessageId?: string;
  /**
   * The files the message holds, in order: ids of the user's uploads
   * (uploadFile). With files, text may be empty. At most GetServerInfo's
   * max_files_per_message, each once (InvalidArgument naming the field).
   */
  fileIds?: string[];
  /**
   * What the send does while a reply of the conversation is queued or
   * running: ENQUEUE (the message waits its turn, marked queued), INTERRUPT
   * (the reply in flight is cancelled) or REJECT (FailedPrecondition);
   * omitted: the conversation's policy, else the server's, ENQUEUE.
   */
  sendPolicy?: SendPolicy;
  signal?: AbortSignal;
}

/** sendMessage appends the user's text and files and queues its reply (two for an A/B comparison). */
export function sendMessage(client: ConvoClient, text: string, o: SendOptions = {}): Promise<SendMessageResponse> {
  return client.sendMessage(
    {
      conversationId: o.conversationId ?? "",
      text,
      model: modelConfig(o.model),
      compareModel: modelConfig(o.compareModel),
      parentMessageId: o.parentMessageId ?? "",
      fileIds: o.fileIds ?? [],
      sendPolicy: o.sendPolicy ?? SendPolicy.UNSPECIFIED,
    },
    { signal: o.signal },
  );
}

/**
 * isLeafMoved tells a refusal of sendMessage because the parentMessageId
 * it named is no longer the active leaf (another tab or client moved the
 * conversation on) from other errors: nothing was sent, and the app shows
 * the conversation as it now is (the stream brings the change) and lets
 * the user send again.
 */
export function isLeafMoved(err: unknown): boolean {
  const e = ConnectError.from(err);
  return e.code === Code.FailedPrecondition && e.rawMessage.includes("is not the active leaf");
}

/**
 * editMessage makes a new version of a user message with text (the old
 * one kept, docs/branches.md) and a queued reply below it, shown as the
 * active path; model unset: the old message's reply's. While a reply of
 * the conversation is being written it is refused with
 * FailedPrecondition (cancel it first: isReplyInProgress). fileIds are
 * the new version's files: to keep the old one's, send their ids again
 * (messageFiles); those left out are not in the new version (the old
 * one keeps them).
 */
export function editMessage(
  client: ConvoClient,
  conversationId: string,
  messageId: string,
  text: string,
  o: { model?: ModelChoice; fileIds?: string[]; signal?: AbortSignal } = {},
): Promise<EditMessageResponse> {
  return client.editMessage(
    { conversationId, messageId, text, model: modelConfig(o.model), fileIds: o.fileIds ?? [] },
    { signal: o.signal },
  );
}

/**
 * regenerateReply writes a reply again: a new version of it (the old one
 * kept) with a queued prompt, shown as the active path. messageId unset:
 * the active path's latest reply; model unset: the old reply's. Refused
 * as editMessage, and for a reply of an A/B comparison.
 */
export function regenerateReply(
  client: ConvoClient,
  conversationId: string,
  messageId = "",
  o: { model?: ModelChoice; signal?: AbortSignal } = {},
): Promise<RegenerateReplyResponse> {
  return client.regenerateReply({ conversationId, messageId, model: modelConfig(o.model) }, { signal: o.signal });
}

/**
 * switchBranch shows another version (SwitchBranch): the active path
 * becomes the path down to the newest message below messageId or, with
 * siblingIndex, below version siblingIndex (from 0) of messageId's turn:
 * the step "‹" or "›" of "‹ n / m ›" is switchBranch(client, id,
 * message.id, message.siblingIndex ∓ 1). It resolves to the new active
 * leaf. Refused as editMessage while a reply is being written.
 */
export async function switchBranch(
  client: ConvoClient,
  conversationId: string,
  messageId: string,
  siblingIndex?: number,
): Promise<string> {
  const res = await client.switchBranch({ conversationId, messageId, siblingIndex });
  return res.leafMessageId;
}

/**
 * isReplyInProgress tells a refusal of editMessage, regenerateReply or
 * switchBranch because a reply is still being written (FailedPrecondition
 * naming the prompt) from other errors: the app says "stop the reply or
 * wait for it" rather than "something went wrong".
 */
export function isReplyInProgress(err: unknown): boolean {
  const e = ConnectError.from(err);
  return e.code === Code.FailedPrecondition && e.rawMessage.includes("is still being written");
}

/** cancelReply stops a queued or running reply; its partial text stays. It reports whether this call cancelled it. */
export async function cancelReply(client: ConvoClient, promptId: string): Promise<boolean> {
  const res = await client.cancelPrompt({ promptId });
  return res.cancelled;
}

/** rateReply records thumbs up or down, and an optional comment, on an assistant message. */
export async function rateReply(client: ConvoClient, messageId: string, rating: "up" | "down", comment = ""): Promise<void> {
  await client.submitFeedback({ messageId, rating: rating === "up" ? Rating.UP : Rating.DOWN, comment });
}

/** voteComparison records which side of an A/B comparison the user prefers. */
export async function voteComparison(client: ConvoClient, comparisonId: string, preference: "a" | "b" | "tie"): Promise<void> {
  const p = { a: Preference.A, b: Preference.B, tie: Preference.TIE }[preference];
  await client.voteComparison({ comparisonId, preference: p });
}

/**
 * An answer to an input request (a pause), of the request's kind, as in
 * AnswerInput's JSON: {approval: {approved, reason?}}, {clientTool:
 * {output}} or {clientTool: {error}}, {question: {answer}}.
 */
export type InputAnswerInit =
  | { approval: { approved: boolean; reason?: string } }
  | { clientTool: { output: string } | { error: string } }
  | { question: { answer: string } };

function inputAnswer(a: InputAnswerInit): MessageInitShape<typeof InputAnswerSchema> {
  if ("approval" in a) return { kind: { case: "approval", value: { approved: a.approval.approved, reason: a.approval.reason ?? "" } } };
  if ("question" in a) return { kind: { case: "question", value: { answer: a.question.answer } } };
  const r = a.clientTool;
  return {
    kind: {
      case: "clientTool",
      value: { result: "error" in r ? { case: "error", value: r.error } : { case: "output", value: r.output } },
    },
  };
}

/**
 * answerInput answers the input request of a tool call (AnswerInput): the
 * first answer wins; a request no longer pending is refused with
 * FailedPrecondition. It returns the request as answered.
 */
export async function answerInput(client: ConvoClient, toolCallId: string, answer: InputAnswerInit): Promise<InputRequest | undefined> {
  const res = await client.answerInput({ toolCallId, answer: inputAnswer(answer) });
  return res.inputRequest;
}

/**
 * claimInput claims a client tool's run for claimant (a tab's id) for
 * leaseSeconds (ClaimInput; 0: 30 s). Claiming again renews the claim; a
 * claim another claimant holds is refused with FailedPrecondition. It
 * returns the request as claimed.
 */
export async function claimInput(
  client: ConvoClient,
  toolCallId: string,
  claimant: string,
  leaseSeconds = 30,
): Promise<InputRequest | undefined> {
  const res = await client.claimInput({ toolCallId, claimant, leaseSeconds });
  return res.inputRequest;
}

/** errorMessage is a short, human-readable description of a failed call. */
export function errorMessage(err: unknown): string {
  const e = ConnectError.from(err);
  switch (e.code) {
    case Code.Unavailable:
      return "The server is unavailable. Try again in a moment.";
    case Code.Unauthenticated:
      return "Your session has expired. Sign in again.";
    case Code.NotFound:
      return "Not found: it may have been deleted.";
    case Code.ResourceExhausted:
      return e.rawMessage || "Too many requests. Try again in a moment.";
    case Code.Canceled:
      return "Cancelled.";
    case Code.FailedPrecondition:
      if (isReplyInProgress(e)) return "A reply is still being written: stop it or wait for it to end, then try again.";
      if (isLeafMoved(e)) {
        return "The conversation changed in another tab or window, so your message was not sent. It now shows the conversation as it is: send again if your message still fits.";
      }
      return e.rawMessage || "Something went wrong.";
    default:
      return e.rawMessage || "Something went wrong.";
  }
}
