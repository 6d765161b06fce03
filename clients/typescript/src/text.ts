// What counts as empty text for a user's message (docs/api.md "Text"):
// the server refuses text made only of characters that show nothing,
// and an app disables its Send and Save buttons on the same rule.

/**
 * invisibleRanges is the set of characters that show nothing by
 * themselves, as the inside of a regular expression's bracket expression
 * in PostgreSQL's notation: white space, control characters, format
 * characters (the zero-width U+200B–U+200D, U+2060, U+FEFF, the bidi
 * controls, the soft hyphen, …), variation selectors and the other
 * default-ignorable code points (Hangul fillers, tag characters, …), and
 * the blank symbols U+2800 (braille pattern blank) and U+1D159. It is
 * convo._invisible of db/functions/client_conversations.sql character for character
 * (the web app's editing.test.tsx checks it), which the server's Go check (wire.Invisible)
 * agrees with on every code point.
 */
export const invisibleRanges =
  "\\u0001-\\u0020\\u007F-\\u00A0\\u00AD\\u034F\\u0600-\\u0605\\u061C\\u06DD\\u070F\\u0890-\\u0891\\u08E2\\u115F-\\u1160\\u1680\\u17B4-\\u17B5\\u180B-\\u180F\\u2000-\\u200F\\u2028-\\u202F\\u205F-\\u206F\\u2800\\u3000\\u3164\\uFE00-\\uFE0F\\uFEFF\\uFFA0\\uFFF0-\\uFFFB\\U000110BD\\U000110CD\\U00013430-\\U0001343F\\U0001BCA0-\\U0001BCA3\\U0001D159\\U0001D173-\\U0001D17A\\U000E0000-\\U000E0FFF";

// A character outside the set (NUL too shows nothing; the server refuses
// it in any text), in JavaScript's notation of astral code points.
const visible = new RegExp(`[^\\u0000${invisibleRanges.replace(/\\U000([0-9A-F]{5})/g, "\\u{$1}")}]`, "u");

/**
 * showsSomething reports whether text has a character that shows
 * something: false for "", "  \n", "\u200b", "\u200b\ufeff" (what the
 * server refuses as a message's text, invalid_argument naming text),
 * true for "\u200bok". A composer or an editor disables Send or Save
 * while it is false.
 */
export function showsSomething(text: string): boolean {
  return visible.test(text);
}
