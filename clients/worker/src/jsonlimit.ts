// convo's one rule for the JSON it accepts, as the server (Go's
// internal/jsonlimit), the Go and Python runtimes and the SQL functions
// (convo._json_check) apply it, with the same wording:
//
//   - every number fits a 64-bit float: no overflow to infinity (1e400),
//     no non-zero value that rounds to zero (1e-400), and a literal of at
//     most MAX_NUMBER_LEN characters;
//   - arrays and objects nest at most MAX_DEPTH levels;
//   - no string or key holds U+0000 or an unpaired UTF-16 surrogate.
//
// It reads JSON text: JSON.parse would turn 1e400 into Infinity (and
// JSON.stringify that into null), losing what the model sent, so a
// model's tool-call arguments are checked as they streamed.

/** How many arrays and objects may enclose one another. */
export const MAX_DEPTH = 64;
/** The longest number literal, in characters. */
export const MAX_NUMBER_LEN = 1000;

/**
 * The first value of text the rule refuses, as "<JSONPath>: <reason>"
 * ("$.expression: number 1e400 is outside the range of a 64-bit float
 * (magnitude between 5e-324 and 1.7e308, or 0)"), or undefined when text
 * follows the rule. Text that is not JSON at all is not this check's to
 * refuse (JSON.parse says what is wrong with it): it answers undefined
 * for it unless a refused value came before the syntax error. One pass,
 * no recursion, whatever the nesting.
 */
export function check(text: string): string | undefined {
  return new Scanner(text).run();
}

interface Frame {
  array: boolean;
  index: number;
  /** The current member's name (undefined while it is read). */
  key: string | undefined;
}

class Refused {
  constructor(readonly message: string) {}
}

class NotJSON {}

class Scanner {
  private pos = 0;
  private readonly path: Frame[] = [];

  constructor(private readonly s: string) {}

  run(): string | undefined {
    try {
      this.value();
      return undefined;
    } catch (e) {
      if (e instanceof Refused) return e.message;
      if (e instanceof NotJSON) return undefined;
      throw e;
    }
  }

  private refuse(reason: string): never {
    throw new Refused(`${this.pathString()}: ${reason}`);
  }

  private syntax(): never {
    throw new NotJSON();
  }

  private pathString(): string {
    let out = "$";
    for (const f of this.path) {
      if (f.array) {
        out += `[${f.index}]`;
        continue;
      }
      if (f.key === undefined) break; // the refused value is this key: the path is its object's
      out += /^[A-Za-z_][A-Za-z0-9_]*$/.test(f.key) ? `.${f.key}` : `[${JSON.stringify(f.key)}]`;
    }
    return out;
  }

  private space(): void {
    while (this.pos < this.s.length) {
      const c = this.s[this.pos];
      if (c !== " " && c !== "\t" && c !== "\n" && c !== "\r") return;
      this.pos++;
    }
  }

  // Iterative: a stack of frames instead of recursion, so that nesting
  // 100,000 deep costs no call stack (it is refused at 65 anyway).
  private value(): void {
    for (;;) {
      this.space();
      const c = this.s[this.pos];
      if (c === "[" || c === "{") {
        if (this.path.length >= MAX_DEPTH) this.refuse(`nested deeper than ${MAX_DEPTH} levels`);
        this.pos++;
        const frame: Frame = { array: c === "[", index: 0, key: undefined };
        this.path.push(frame);
        this.space();
        if (this.s[this.pos] === (frame.array ? "]" : "}")) {
          this.pos++;
          this.path.pop();
          if (this.next()) return;
          continue;
        }
        if (!frame.array) this.member();
        continue;
      }
      if (c === '"') this.str();
      else if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) this.number();
      else if (this.s.startsWith("true", this.pos)) this.pos += 4;
      else if (this.s.startsWith("false", this.pos)) this.pos += 5;
      else if (this.s.startsWith("null", this.pos)) this.pos += 4;
      else this.syntax();
      if (this.next()) return;
    }
  }

  /** Reads an object member's name and colon. */
  private member(): void {
    const f = this.path[this.path.length - 1];
    f.key = undefined;
    this.space();
    if (this.s[this.pos] !== '"') this.syntax();
    f.key = this.str();
    this.space();
    if (this.s[this.pos] !== ":") this.syntax();
    this.pos++;
  }

  /**
   * After a value: steps over separators and closers. True when the
   * whole text is read; false when another value follows.
   */
  private next(): boolean {
    for (;;) {
      this.space();
      const f = this.path[this.path.length - 1];
      if (!f) {
        if (this.pos !== this.s.length) this.syntax();
        return true;
      }
      const c = this.s[this.pos];
      if (c === ",") {
        this.pos++;
        f.index++;
        if (!f.array) this.member();
        return false;
      }
      if (c !== (f.array ? "]" : "}")) this.syntax();
      this.pos++;
      this.path.pop();
    }
  }

  /** Reads a string at its opening quote and returns its value. */
  private str(): string {
    this.pos++;
    let out = "";
    let from = this.pos;
    while (this.pos < this.s.length) {
      const code = this.s.charCodeAt(this.pos);
      if (code === 0x22) {
        out += this.s.slice(from, this.pos);
        this.pos++;
        return out;
      }
      if (code < 0x20) this.syntax();
      if (code >= 0xd800 && code <= 0xdfff) {
        // A surrogate in the text itself (a JS string is UTF-16).
        const lo = this.s.charCodeAt(this.pos + 1);
        if (code <= 0xdbff && lo >= 0xdc00 && lo <= 0xdfff) {
          this.pos += 2;
          continue;
        }
        this.refuse(`a string holds an unpaired surrogate \\u${code.toString(16).padStart(4, "0")}`);
      }
      if (code !== 0x5c) {
        this.pos++;
        continue;
      }
      out += this.s.slice(from, this.pos);
      out += this.escape();
      from = this.pos;
    }
    this.syntax();
  }

  /** Reads one escape at its backslash and returns what it stands for. */
  private escape(): string {
    const e = this.s[this.pos + 1];
    const simple: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
    if (e !== undefined && e in simple) {
      this.pos += 2;
      return simple[e];
    }
    if (e !== "u") this.syntax();
    const r = this.hex4(this.pos + 2);
    this.pos += 6;
    if (r === 0) this.refuse("a string holds \\u0000, which PostgreSQL cannot store");
    if (r >= 0xd800 && r <= 0xdbff) {
      if (this.s[this.pos] === "\\" && this.s[this.pos + 1] === "u") {
        const lo = this.hex4(this.pos + 2, false);
        if (lo >= 0xdc00 && lo <= 0xdfff) {
          this.pos += 6;
          return String.fromCharCode(r, lo);
        }
      }
      this.refuse(`a string holds an unpaired surrogate \\u${r.toString(16).padStart(4, "0")}`);
    }
    if (r >= 0xdc00 && r <= 0xdfff) this.refuse(`a string holds an unpaired surrogate \\u${r.toString(16).padStart(4, "0")}`);
    return String.fromCharCode(r);
  }

  private hex4(at: number, strict = true): number {
    const h = this.s.slice(at, at + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(h)) {
      if (strict) this.syntax();
      return -1;
    }
    return parseInt(h, 16);
  }

  private digits(): number {
    const start = this.pos;
    for (let c = this.s.charCodeAt(this.pos); c >= 0x30 && c <= 0x39; c = this.s.charCodeAt(this.pos)) this.pos++;
    return this.pos - start;
  }

  /** Reads a number and applies the rule to it. */
  private number(): void {
    const from = this.pos;
    if (this.s[this.pos] === "-") this.pos++;
    const intStart = this.pos;
    const n = this.digits();
    if (n === 0 || (n > 1 && this.s[intStart] === "0")) this.syntax();
    if (this.s[this.pos] === ".") {
      this.pos++;
      if (this.digits() === 0) this.syntax();
    }
    const mantissaEnd = this.pos;
    if (this.s[this.pos] === "e" || this.s[this.pos] === "E") {
      this.pos++;
      if (this.s[this.pos] === "+" || this.s[this.pos] === "-") this.pos++;
      if (this.digits() === 0) this.syntax();
    }
    if (this.pos - from <= 15 && this.pos === mantissaEnd) return; // short, no exponent: in range
    const lit = this.s.slice(from, this.pos);
    if (lit.length > MAX_NUMBER_LEN) this.refuse(`a number of ${lit.length} characters (at most ${MAX_NUMBER_LEN})`);
    const f = Number(lit);
    if (!Number.isFinite(f) || (f === 0 && /[1-9]/.test(this.s.slice(intStart, mantissaEnd)))) {
      const shown = lit.length > 32 ? `${lit.slice(0, 32)}…` : lit;
      this.refuse(`number ${shown} is outside the range of a 64-bit float (magnitude between 5e-324 and 1.7e308, or 0)`);
    }
  }
}
