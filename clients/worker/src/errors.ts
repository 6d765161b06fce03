// The errors of @convo/worker. Every error the runtime raises is a
// WorkerError with a `code`, so a handler (or the code around a worker)
// can tell "the user cancelled" from "PostgreSQL refused a write" without
// reading messages.

/** What stopped a reply, or what went wrong. */
export type WorkerErrorCode =
  /** The user cancelled the prompt (CancelPrompt): write nothing more. */
  | "cancelled"
  /** The prompt is no longer this worker's: its lease expired, or another worker holds it. */
  | "lease_lost"
  /** The worker is stopping (stop(), or drain() past its timeout). */
  | "shutting_down"
  /** convo refused a write of this reply (an illegal write, bad metadata, invalid structured JSON …). */
  | "write_refused"
  /** PostgreSQL could not be reached, or answered with an error, for longer than the runtime retries. */
  | "database"
  /** The reply was already settled (completed or failed): it takes no more writes. */
  | "settled"
  /** A setting or an argument is not valid; the message names it. */
  | "invalid_argument";

/** An error of @convo/worker. `code` says what kind. */
export class WorkerError extends Error {
  readonly code: WorkerErrorCode;
  /** The SQLSTATE, when PostgreSQL (or convo's SQL API) raised it: CV001, CV002, CV003 … */
  readonly sqlState?: string;

  constructor(code: WorkerErrorCode, message: string, options?: { cause?: unknown; sqlState?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "WorkerError";
    this.code = code;
    this.sqlState = options?.sqlState;
  }
}

/** Whether err is a WorkerError, optionally of one of the codes. */
export function isWorkerError(err: unknown, ...codes: WorkerErrorCode[]): err is WorkerError {
  return err instanceof WorkerError && (codes.length === 0 || codes.includes(err.code));
}

/**
 * Whether err means that the reply must stop writing because of something
 * outside the handler (a cancel, a lost lease, a shutdown): the error a
 * reply's methods throw after its job's signal fired.
 */
export function isStopped(err: unknown): err is WorkerError {
  return isWorkerError(err, "cancelled", "lease_lost", "shutting_down", "settled");
}

export function invalidArgument(message: string): WorkerError {
  return new WorkerError("invalid_argument", message);
}

/** The message of anything thrown, for a prompt's error. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  if (typeof err === "string") return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}
