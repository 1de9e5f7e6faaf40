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

/** True for a `tchar` of RFC 9110 section 5.6.2. */
function isTchar(c: number): boolean {
  return (
    (c >= 97 && c <= 122) || // a-z
    (c >= 65 && c <= 90) || // A-Z
    (c >= 48 && c <= 57) || // 0-9
    c === 33 || // !
    (c >= 35 && c <= 39) || // # $ % & '
    c === 42 || // *
    c === 43 || // +
    c === 45 || // -
    c === 46 || // .
    c === 94 || // ^
    c === 95 || // _
    c === 96 || // `
    c === 124 || // |
    c === 126 // ~
  );
}

/** A character of an unquoted value: a `tchar`, or `:`, `[`, `]` (see the module note). */
function isValueChar(c: number): boolean {
  return isTchar(c) || c === 58 || c === 91 || c === 93;
}

/** `qdtext` of RFC 9110 section 5.6.4: HTAB, SP, `!`, `#`-`[`, `]`-`~`, obs-text. */
function isQdtext(c: number): boolean {
  return (
    c === 9 ||
    c === 32 ||
    c === 33 ||
    (c >= 35 && c <= 91) ||
    (c >= 93 && c <= 126) ||
    (c >= 128 && c <= 255)
  );
}

/** The character after `\` in a quoted-pair: HTAB, SP, VCHAR, obs-text. */
function isQuotedPairChar(c: number): boolean {
  return c === 9 || (c >= 32 && c <= 126) || (c >= 128 && c <= 255);
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
  // One set, cleared per element: a lookup per parameter keeps a field linear in its
  // length (an array's `includes` made one element of N distinct names cost O(N²)).
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
      while (i < n && isTchar(value.charCodeAt(i))) i++;
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
              if (i + 1 === n || !isQuotedPairChar(value.charCodeAt(i + 1))) return undefined;
              text += value[i + 1];
              i += 2;
            } else {
              if (!isQdtext(c)) return undefined;
              text += value[i];
              i++;
            }
          }
          i++; // the closing quote
        } else {
          const valueStart = i;
          while (i < n && isValueChar(value.charCodeAt(i))) i++;
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
