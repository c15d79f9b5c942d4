// counterHint suggests the query a person most likely wants when they ask
// for a bare counter (a cumulative total is a rising line that says little)
// or pass a counter to rate() without a range. It returns null when the
// query is fine as it is.
const selector = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^{}]*\})?$/;
const counterName = /_(total|count|sum|bucket)$/;

export function counterHint(q: string, window = "5m"): string | null {
  const s = q.trim();
  let m = selector.exec(s);
  if (m && counterName.test(m[1])) return `rate(${s}[${window}])`;
  // rate(x), irate(x), increase(x) without [range]: "expected type range vector".
  const f = /^(rate|irate|increase)\(\s*([^()[\]]+?)\s*\)$/.exec(s);
  if (f && (m = selector.exec(f[2]))) return `${f[1]}(${f[2]}[${window}])`;
  return null;
}

// rangeSelector matches a bare range selector such as x[5m]: a query_range
// of it is an error, but its samples make a table.
const rangeSel = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^{}]*\})?)\[([0-9a-z]+)\]$/;

export function isRangeSelector(q: string): boolean {
  return rangeSel.test(q.trim());
}

// rangeHint offers rate() of a counter's range selector.
export function rangeHint(q: string): string | null {
  const m = rangeSel.exec(q.trim());
  if (!m) return null;
  const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(m[1])?.[0] ?? "";
  return counterName.test(name) ? `rate(${q.trim()})` : null;
}
