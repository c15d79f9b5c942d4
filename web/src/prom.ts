// A small client of the Prometheus HTTP API v1 on the same origin.

export type Labels = Record<string, string>;
export interface VectorSample {
  metric: Labels;
  value: [number, string];
}
export interface MatrixSeries {
  metric: Labels;
  values: [number, string][];
}
export type QueryData =
  | { resultType: "vector"; result: VectorSample[] }
  | { resultType: "matrix"; result: MatrixSeries[] }
  | { resultType: "scalar"; result: [number, string] }
  | { resultType: "string"; result: [number, string] };

export class QueryError extends Error {}

// Relative URLs so the app works wherever the handler is mounted.
export let apiBase = "api/v1/";

async function call(path: string, params: Record<string, string>, signal?: AbortSignal): Promise<QueryData> {
  const body = new URLSearchParams(params);
  let resp: Response;
  try {
    resp = await fetch(apiBase + path, {
      method: "POST",
      body,
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      signal,
    });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw new QueryError(`${path}: server unreachable`);
  }
  let json: { status?: string; data?: QueryData; error?: string; errorType?: string };
  try {
    json = await resp.json();
  } catch {
    throw new QueryError(`${path}: HTTP ${resp.status}, not JSON`);
  }
  if (json.status !== "success" || !json.data) {
    throw new QueryError(json.error ? `${json.errorType ?? "error"}: ${json.error}` : `${path}: HTTP ${resp.status}`);
  }
  return json.data;
}

export function instantQuery(expr: string, timeMs?: number, signal?: AbortSignal): Promise<QueryData> {
  const p: Record<string, string> = { query: expr };
  if (timeMs !== undefined) p.time = String(timeMs / 1000);
  return call("query", p, signal);
}

export async function rangeQuery(
  expr: string,
  startMs: number,
  endMs: number,
  stepSec: number,
  signal?: AbortSignal,
): Promise<MatrixSeries[]> {
  const d = await call(
    "query_range",
    { query: expr, start: String(startMs / 1000), end: String(endMs / 1000), step: String(stepSec) },
    signal,
  );
  if (d.resultType !== "matrix") throw new QueryError(`query_range returned ${d.resultType}`);
  return d.result;
}
