/**
 * A strict parser for the RFC 7239 `Forwarded` header field, written so that a client cannot
 * hide the element its proxy appended: quoted-strings follow RFC 9110 section 5.6.4 (a
 * quoted-pair `\x` stands for `x`, so `\"` does not end the string), and a field that does
 * not parse is rejected as a whole instead of being split on a guess.
 *
 * Grammar (RFC 7239 section 4, list rule of RFC 9110 section 5.6.1):
 * ```
 * Forwarded         = 1#forwarded-element
 * forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
 * forwarded-pair    = token "=" value
 * value             = token / quoted-string
 * ```
 * Two tolerances, neither of which can move an element boundary: whitespace is accepted
 * around `;` (common in hand-written configs), and an unquoted value may also hold `:`,
 * `[` and `]` (proxies write `for=[2001:db8::1]` or `for=192.0.2.1:80` without the quotes
 * RFC 7239 asks for). Empty list elements are skipped (RFC 9110 section 5.6.1.2).
 */

/** A `tchar` of RFC 9110 section 5.6.2. */
const TCHAR = 1;
/** A character of an unquoted value: a `tchar`, or `:`, `[`, `]` (see the module note). */
const VALUE = 2;
/** `qdtext` of RFC 9110 section 5.6.4: HTAB, SP, `!`, `#`-`[`, `]`-`~`, obs-text. */
const QDTEXT = 4;
/** The character after `\` in a quoted-pair: HTAB, SP, VCHAR, obs-text. */
const PAIR = 8;

/** The classes (bits above) of each character code 0-255. */
const CLASSES = new Uint8Array(256);
for (let c = 0; c < 256; c++) {
  const tchar = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/.test(String.fromCharCode(c));
  const visible = c === 9 || (c >= 32 && c !== 127); // HTAB, SP, VCHAR, obs-text
  CLASSES[c] =
    (tchar || c === 58 || c === 91 || c === 93 ? VALUE : 0) |
    (tchar ? TCHAR : 0) |
    (visible && c !== 34 && c !== 92 ? QDTEXT : 0) |
    (visible ? PAIR : 0);
}

/** True when character code `c` is of class `cls`. */
function is(c: number, cls: number): boolean {
  return c < 256 && (CLASSES[c]! & cls) !== 0;
}

/** Index of the first character at or after `i` that is not SP or HTAB. */
function skipOws(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 32 && c !== 9) break;
    i++;
  }
  return i;
}

/**
 * The `for=` value of every element of a `Forwarded` field value, client first, unquoted
 * (`for="[2001:db8::17]:4711"` gives `[2001:db8::17]:4711`); `""` for an element without
 * `for=`. Parameter names are case-insensitive.
 *
 * Returns `undefined` when the value does not parse: an unterminated quoted-string (the
 * open quote of a client's element would otherwise swallow the element the proxy
 * appended after it), a `"` or `\` outside a quoted-string, a pair without `=` or with an
 * empty value, a parameter twice in one element (RFC 7239 section 4: "MUST NOT occur more
 * than once"), a control character. Callers must then trust none of it.
 */
export function parseForwarded(value: string): string[] | undefined {
  const hops: string[] = [];
  // One set, cleared per element: a lookup per name keeps a field linear in its length.
  const names = new Set<string>();
  const n = value.length;
  let i = 0;
  for (;;) {
    i = skipOws(value, i);
    if (i === n) return hops;
    if (value.charCodeAt(i) === 44) {
      i++; // an empty element
      continue;
    }
    let forValue = "";
    names.clear();
    for (;;) {
      const start = i;
      while (i < n && is(value.charCodeAt(i), TCHAR)) i++;
      if (i > start) {
        const name = value.slice(start, i).toLowerCase();
        if (i === n || value.charCodeAt(i) !== 61) return undefined; // no "="
        i++;
        let text: string;
        if (i < n && value.charCodeAt(i) === 34) {
          text = "";
          i++;
          for (;;) {
            if (i === n) return undefined; // unterminated quoted-string
            const c = value.charCodeAt(i);
            if (c === 34) break;
            if (c === 92) {
              if (i + 1 === n || !is(value.charCodeAt(i + 1), PAIR)) return undefined;
              text += value[i + 1];
              i += 2;
            } else {
              if (!is(c, QDTEXT)) return undefined;
              text += value[i];
              i++;
            }
          }
          i++; // the closing quote
        } else {
          const valueStart = i;
          while (i < n && is(value.charCodeAt(i), VALUE)) i++;
          if (i === valueStart) return undefined; // empty value
          text = value.slice(valueStart, i);
        }
        if (names.has(name)) return undefined;
        names.add(name);
        if (name === "for") forValue = text;
      }
      i = skipOws(value, i);
      if (i === n || value.charCodeAt(i) === 44) break;
      if (value.charCodeAt(i) !== 59) return undefined; // only ";" may follow a pair
      i++;
      i = skipOws(value, i);
    }
    hops.push(forValue);
    if (i === n) return hops;
    i++; // the ","
  }
}
