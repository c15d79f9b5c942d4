// The one client of Vigil's HTTP API on the same origin: the Prometheus API
// v1 (query, query_range, series, labels, label values), the log service
// (api/v1/logs/), the dashboard's own endpoints (api/web/) and their
// server-sent event streams. Every request has a timeout and a bound on the
// size of its answer, every failure is an ApiError, and every request and
// stream ends when the caller's AbortSignal fires (a view passes the signal
// that is aborted when it is left). URLs are relative, so the app works
// wherever the handler is mounted; credentials (basic auth, client
// certificates of --web-config) are the browser's for this origin and are
// always sent.
import type { JobIO } from "./appio";
import { decodeFrame, decodeNodes, type Frame, type NodeEntry } from "./frame";

// Defaults of CallOptions.
export const defaultTimeoutMs = 120_000; // the server's default query timeout
export const defaultMaxBytes = 64 << 20; // a tab holding more JSON is unusable anyway

export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number; // the whole request, answer included
  maxBytes?: number; // bytes of the answer's body
}

// ApiError is every failure of a request: the server's error answer (HTTP
// status, the Prometheus API's errorType and error, or the log API's
// error), or no usable answer (status 0: errorType "unreachable" or
// "timeout"; "too_large" and "bad_answer" for answers that cannot be read).
// reason is the message without the endpoint, for views that say where.
export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly endpoint: string,
    readonly status: number,
    readonly errorType: string,
    readonly reason: string,
  ) {
    super(`${endpoint}: ${reason}`);
  }

  // unavailable is the server's answer for a service it does not run (the
  // log API without syslog intake).
  get unavailable(): boolean {
    return this.errorType === "unavailable";
  }
}

// isAbort tells a request ended by its caller (a view left, a newer request)
// from a failure; aborted requests are not errors to show.
export function isAbort(e: unknown): boolean {
  return e instanceof Error && e.name === "AbortError";
}

function abortError(): Error {
  return new DOMException("request aborted", "AbortError");
}

// errorFrom reads a failed answer: {"status":"error","errorType":..,
// "error":..} from the Prometheus API, {"error":..} from the log and
// dashboard APIs, else the status and the start of a text body (a proxy's
// or the basic-auth "Unauthorized" page).
export function errorFrom(endpoint: string, status: number, body: unknown): ApiError {
  if (body !== null && typeof body === "object" && !Array.isArray(body)) {
    const o = body as Record<string, unknown>;
    const type = typeof o.errorType === "string" ? o.errorType : "";
    if (typeof o.error === "string" && o.error !== "") return new ApiError(endpoint, status, type, o.error);
    return new ApiError(endpoint, status, type, `HTTP ${status}`);
  }
  let text = typeof body === "string" ? body.trim().split("\n", 1)[0] : "";
  if (text.length > 200) text = text.slice(0, 200) + "…";
  return new ApiError(endpoint, status, "", text ? `HTTP ${status}: ${text}` : `HTTP ${status}`);
}

function tooLarge(endpoint: string, status: number, max: number): ApiError {
  return new ApiError(endpoint, status, "too_large",
    `answer larger than ${Math.round(max / (1 << 20))} MiB; ask for less (a narrower selector or time range)`);
}

// readCapped reads the body as text, failing once it passes max bytes.
async function readCapped(resp: Response, endpoint: string, max: number): Promise<string> {
  if (Number(resp.headers.get("Content-Length") ?? 0) > max) throw tooLarge(endpoint, resp.status, max);
  if (!resp.body) return resp.text();
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  const parts: string[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > max) {
      reader.cancel().catch(() => {});
      throw tooLarge(endpoint, resp.status, max);
    }
    parts.push(dec.decode(value, { stream: true }));
  }
  parts.push(dec.decode());
  return parts.join("");
}

// request sends one request and returns its JSON answer. endpoint names
// the request in errors.
export async function request(
  endpoint: string,
  path: string,
  init: { method?: "GET" | "POST"; query?: URLSearchParams; form?: URLSearchParams },
  o: CallOptions = {},
): Promise<unknown> {
  if (o.signal?.aborted) throw abortError();
  const timeoutMs = o.timeoutMs ?? defaultTimeoutMs;
  const ctl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort();
  }, timeoutMs);
  const onAbort = () => ctl.abort();
  o.signal?.addEventListener("abort", onAbort, { once: true });
  // Anything that ends the request early: the caller's abort stays an
  // AbortError, the rest become ApiErrors.
  let answered = false;
  const failure = (e: unknown): Error => {
    if (o.signal?.aborted) return abortError();
    if (timedOut) return new ApiError(endpoint, 0, "timeout", `no answer within ${timeoutMs / 1000} s`);
    if (e instanceof ApiError) return e;
    return new ApiError(endpoint, 0, "unreachable", answered ? "answer cut off" : "server unreachable");
  };
  const qs = init.query?.toString();
  const headers: Record<string, string> = { Accept: "application/json" };
  if (init.form) headers["Content-Type"] = "application/x-www-form-urlencoded";
  try {
    let resp: Response;
    let text: string;
    try {
      resp = await fetch(path + (qs ? "?" + qs : ""), {
        method: init.method ?? (init.form ? "POST" : "GET"),
        body: init.form,
        headers,
        credentials: "same-origin",
        cache: "no-store",
        signal: ctl.signal,
      });
      answered = true;
      text = await readCapped(resp, endpoint, o.maxBytes ?? defaultMaxBytes);
    } catch (e) {
      throw failure(e);
    }
    let body: unknown = text;
    let json = false;
    try {
      body = JSON.parse(text);
      json = true;
    } catch {
      /* a text answer */
    }
    if (!resp.ok) throw errorFrom(endpoint, resp.status, body);
    if (!json) throw new ApiError(endpoint, resp.status, "bad_answer", `HTTP ${resp.status}, not JSON`);
    return body;
  } finally {
    clearTimeout(timer);
    o.signal?.removeEventListener("abort", onAbort);
  }
}

// --- Prometheus API v1

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

const promBase = "api/v1/";

// prom calls one endpoint of the Prometheus API and returns its data.
async function prom<T>(endpoint: string, path: string, params: URLSearchParams, o: CallOptions, post = true): Promise<T> {
  const body = await request(endpoint, promBase + path, post ? { form: params } : { query: params }, o);
  const env = body !== null && typeof body === "object" ? (body as { status?: unknown; data?: unknown }) : {};
  if (env.status !== "success" || env.data === undefined) {
    if (env.status === "error") throw errorFrom(endpoint, 200, body);
    throw new ApiError(endpoint, 200, "bad_answer", "not a Prometheus API answer");
  }
  return env.data as T;
}

function matchParams(matchers: string[], startMs?: number, endMs?: number): URLSearchParams {
  const p = new URLSearchParams();
  for (const m of matchers) p.append("match[]", m);
  if (startMs !== undefined) p.set("start", String(startMs / 1000));
  if (endMs !== undefined) p.set("end", String(endMs / 1000));
  return p;
}

export function instantQuery(expr: string, timeMs?: number, o: CallOptions = {}): Promise<QueryData> {
  const p = new URLSearchParams({ query: expr });
  if (timeMs !== undefined) p.set("time", String(timeMs / 1000));
  return prom("query", "query", p, o);
}

export async function rangeQuery(expr: string, startMs: number, endMs: number, stepSec: number, o: CallOptions = {}): Promise<MatrixSeries[]> {
  const p = new URLSearchParams({ query: expr, start: String(startMs / 1000), end: String(endMs / 1000), step: String(stepSec) });
  const d = await prom<QueryData>("query_range", "query_range", p, o);
  if (d.resultType !== "matrix") throw new ApiError("query_range", 200, "bad_answer", `result of type ${d.resultType}, want matrix`);
  return d.result;
}

export function series(matchers: string[], startMs?: number, endMs?: number, o: CallOptions = {}): Promise<Labels[]> {
  return prom("series", "series", matchParams(matchers, startMs, endMs), o);
}

export function labelNames(matchers: string[] = [], o: CallOptions = {}): Promise<string[]> {
  return prom("labels", "labels", matchParams(matchers), o);
}

// labelValues uses GET, the one method every Prometheus-compatible server
// accepts for it.
export function labelValues(name: string, matchers: string[] = [], o: CallOptions = {}): Promise<string[]> {
  return prom(`label ${name} values`, `label/${encodeURIComponent(name)}/values`, matchParams(matchers), o, false);
}

// --- job index (internal/jobs, the server's api/v1/jobs)

export type JobState = "pending" | "running" | "completed" | "failed" | "cancelled" | "timeout" | "oom" | "node_fail" | "ended";

export interface NodeSummary {
  node: string;
  cpu_efficiency: number;
  mem_used_peak?: number; // snake_case of MemUsedPeak; mem_used_peak_bytes also read
  mem_used_peak_bytes?: number;
  read_bytes: number;
  write_bytes: number;
}

// JobSummary is written at the job's end, so a report outlives raw data.
export interface JobSummary {
  cpu_efficiency: number; // 0..1
  mem_used_peak_bytes: number;
  mem_efficiency: number; // 0..1, 0 if the memory asked is unknown
  read_bytes: number;
  write_bytes: number;
  nodes: NodeSummary[] | null;
  stragglers?: string[] | null;
  notes?: string[] | null;
}

// Job is one entry of the index; times are RFC 3339, absent when unknown.
export interface Job {
  id: string;
  user?: string;
  account?: string;
  partition?: string;
  name?: string;
  nodes?: string[] | null;
  cpus?: number;
  mem_bytes?: number;
  gpus?: number;
  time_limit?: number; // seconds
  submit?: string;
  start?: string;
  end?: string;
  state: JobState | string;
  exit_code?: number;
  summary?: JobSummary | null;
}

// ReportSeries is one metric over the job's life: [unix s, value] points
// of the median, p10 and p90 across its nodes, and each node's own.
export type Points = [number, number | string | null][];
export interface ReportSeries {
  median?: Points | null;
  p10?: Points | null;
  p90?: Points | null;
  nodes?: Record<string, Points> | null;
}

// JobReport: series is empty once the raw samples have expired.
export interface JobReport {
  job: Job;
  summary: JobSummary | null;
  series: Record<string, ReportSeries> | null;
  io?: JobIO | null; // application I/O, when the job has appio series
  energy?: unknown; // checked by energy.ts's validEnergy
  lustre?: unknown; // checked by lustre.ts's validLustre
}

// listJobs asks the index (newest first); params: user, state, partition,
// node, since, limit.
export async function listJobs(params: URLSearchParams, o: CallOptions = {}): Promise<Job[]> {
  const d = await prom<Job[] | null>("jobs", "jobs", params, o, false);
  if (d !== null && !Array.isArray(d)) throw new ApiError("jobs", 200, "bad_answer", "data is not a list of jobs");
  return d ?? [];
}

export function getJob(id: string, o: CallOptions = {}): Promise<Job> {
  return prom(`job ${id}`, "jobs/" + encodeURIComponent(id), new URLSearchParams(), o, false);
}

export function jobReport(id: string, o: CallOptions = {}): Promise<JobReport> {
  return prom(`job ${id} report`, "jobs/" + encodeURIComponent(id) + "/report", new URLSearchParams(), o, false);
}

// --- fabric (internal/fabric, docs/fabric-view.md)

export interface FabricSwitch {
  guid: string;
  name: string;
  level: "leaf" | "spine" | "core" | string;
  lid?: string;
  nodes?: string[];
  node_count: number;
  swept: boolean;
}

export interface FabricLink {
  name: string;
  switch_guid: string;
  switch: string;
  port: string;
  remote_guid: string;
  remote: string;
  remote_port: string;
  remote_type: "switch" | "ca" | string;
  host?: string;
  rate?: string;
  width?: string;
  speed?: string;
  up: boolean;
  capacity_bytes_per_second: number;
  tx_bytes_per_second: number;
  rx_bytes_per_second: number;
  utilization: number;
  xmit_wait_per_second: number;
  errors_per_second: number;
}

export interface FabricAnswer {
  time: string;
  window: string;
  switches: FabricSwitch[] | null;
  links: FabricLink[] | null;
  truncated?: boolean;
}

export interface FabricJobRef {
  id: string;
  user?: string;
  name?: string;
  nodes: number;
}

export interface FabricTopLink extends FabricLink {
  value: number;
  nodes_below: number;
  job_count: number;
  jobs: FabricJobRef[] | null;
}

export interface FabricTop {
  time: string;
  window: string;
  by: string;
  job?: string;
  links: FabricTopLink[] | null;
  total: number;
}

// fabric reads the topology and the links' values over window.
export function fabric(window: string, o: CallOptions = {}): Promise<FabricAnswer> {
  return prom("fabric", "fabric", new URLSearchParams({ window }), o, false);
}

// fabricTop ranks links; params: by, limit, window, job, link (GUID/PORT).
export function fabricTop(params: URLSearchParams, o: CallOptions = {}): Promise<FabricTop> {
  return prom("fabric top", "fabric/top", params, o, false);
}

// --- log service (internal/logs/logsvc)

export interface LogRecord {
  seq: number;
  time: string;
  received: string;
  host: string;
  app?: string;
  procid?: string;
  msgid?: string;
  severity: string;
  facility: number;
  pattern: number;
  text: string;
  malformed?: boolean;
  truncated?: boolean;
}

export interface SearchResponse {
  records: LogRecord[];
  next_cursor?: string;
}

// LogSeries is a window of per-bucket counts: counts[i] covers bucket
// end-(n-1-i), a bucket being width_s seconds since the Unix epoch.
export interface LogSeries {
  width_s: number;
  end: number;
  counts: number[];
}

export interface HostCount {
  host: string;
  count: number;
}

export interface Pattern {
  id: number;
  template: string;
  count: number;
  first_seen: string;
  last_seen: string;
  examples: string[] | null;
  hosts: HostCount[] | null;
  hosts_overflow?: number;
  per_minute: LogSeries;
  per_hour: LogSeries;
}

export interface PatternsResponse {
  total: number;
  patterns: Pattern[];
}

export interface PatternEvent {
  time: string;
  pattern: number;
  template: string;
  host: string;
  app: string;
  example: string;
  seq: number;
}

const logsBase = "api/v1/logs/";

export function searchLogs(params: URLSearchParams, o: CallOptions = {}): Promise<SearchResponse> {
  return request("search", logsBase + "search", { query: params }, o) as Promise<SearchResponse>;
}

export function logPatterns(params: URLSearchParams, o: CallOptions = {}): Promise<PatternsResponse> {
  return request("patterns", logsBase + "patterns", { query: params }, o) as Promise<PatternsResponse>;
}

export function patternEvents(since: string, o: CallOptions = {}): Promise<{ events: PatternEvent[] | null }> {
  return request("patterns/events", logsBase + "patterns/events", { query: new URLSearchParams({ since }) }, o) as Promise<{ events: PatternEvent[] | null }>;
}

// --- dashboard endpoints (internal/web)

// TreeJSON is the aggregator tree as the server encodes it; its shape
// belongs to internal/treestatus, the tree view renders any nesting.
export type TreeJSON = null | boolean | number | string | TreeJSON[] | { [k: string]: TreeJSON };

export async function treeStatus(o: CallOptions = {}): Promise<TreeJSON> {
  const body = (await request("tree", "api/web/tree", {}, o)) as { tree?: TreeJSON } | null;
  return body?.tree ?? null;
}

// --- server-sent event streams

export type StreamState = "connecting" | "live" | "reconnecting" | "closed";

export interface StreamOptions {
  signal: AbortSignal;
  // Handlers of the stream's events by name ("message" for unnamed ones).
  // "error" is not one: the log API's error event ends the stream (stopped).
  on: Record<string, (data: string) => void>;
  state?(s: StreamState): void;
  // stopped gets the message of a server that ended the stream for good.
  stopped?(msg: string): void;
  retryMs?: number; // first wait before reconnecting, doubled per failure
  maxRetryMs?: number;
}

export interface Stream {
  close(): void;
}

// openStream opens an EventSource on url() and reopens it after a
// disconnect or a refusal (503: too many viewers) with a growing wait,
// asking url() again so the caller can resume where it left off
// (EventSource's own reconnect would repeat the first URL). The stream ends
// on close(), on the signal, or when the server sends an error event.
export function openStream(url: () => string, o: StreamOptions): Stream {
  const first = o.retryMs ?? 2000;
  const max = o.maxRetryMs ?? 30_000;
  let delay = first;
  let es: EventSource | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    clearTimeout(timer);
    es?.close();
    es = null;
    o.signal.removeEventListener("abort", close);
  };
  const connect = () => {
    if (closed) return;
    const s = new EventSource(url());
    es = s;
    s.addEventListener("open", () => {
      if (es !== s) return;
      delay = first;
      o.state?.("live");
    });
    for (const [name, fn] of Object.entries(o.on)) {
      s.addEventListener(name, (e) => es === s && fn((e as MessageEvent).data));
    }
    s.addEventListener("error", (e) => {
      if (es !== s) return;
      s.close();
      es = null;
      // A server's "event: error" carries data; the browser's own has none.
      if (e instanceof MessageEvent && typeof e.data === "string") {
        close();
        o.state?.("closed");
        o.stopped?.(unquote(e.data));
        return;
      }
      o.state?.("reconnecting");
      timer = setTimeout(connect, delay);
      delay = Math.min(2 * delay, max);
    });
  };
  if (o.signal.aborted) return { close };
  o.signal.addEventListener("abort", close, { once: true });
  o.state?.("connecting");
  connect();
  return { close };
}

// unquote reads the log API's quoted error message, or keeps it as it is.
function unquote(s: string): string {
  try {
    const v = JSON.parse(s);
    return typeof v === "string" ? v : s;
  } catch {
    return s;
  }
}

export interface TailHandlers {
  record(r: LogRecord): void;
  state?(s: StreamState): void;
  stopped?(msg: string): void;
}

// tailLogs streams records matching q stored after after() (the newest one
// shown; null: from the server's newest), resuming after a disconnect
// where the caller left off, so nothing is skipped.
export function tailLogs(q: string, after: () => number | null, h: TailHandlers, signal: AbortSignal): Stream {
  return openStream(() => {
    const p = new URLSearchParams();
    if (q.trim()) p.set("q", q.trim());
    const a = after();
    if (a !== null) p.set("after", String(a));
    const qs = p.toString();
    return logsBase + "tail" + (qs ? "?" + qs : "");
  }, {
    signal, state: h.state, stopped: h.stopped,
    on: {
      message(data) {
        let r: LogRecord;
        try {
          r = JSON.parse(data) as LogRecord;
        } catch {
          return;
        }
        h.record(r);
      },
    },
  });
}

export interface LiveHandlers {
  nodes(n: NodeEntry[]): void;
  frame(f: Frame, wireBytes: number): void;
  error(msg: string, fatal: boolean): void;
  state(s: StreamState): void;
}

// liveHeatmap streams api/web/live: the node list, then one frame per step
// (README: live heatmap wire format). A fatal queryerror (a bad
// expression) ends the stream; other failures are retried.
export function liveHeatmap(expr: string, h: LiveHandlers, signal: AbortSignal): Stream {
  const s: Stream = openStream(() => "api/web/live?expr=" + encodeURIComponent(expr), {
    signal, state: h.state,
    on: {
      nodes(data) {
        try {
          h.nodes(decodeNodes(data));
        } catch (err) {
          h.error(String(err), false);
        }
      },
      frame(data) {
        try {
          h.frame(decodeFrame(data), data.length + 21); // + "event: frame\ndata: " and blank line
        } catch (err) {
          h.error(String(err), false);
        }
      },
      queryerror(data) {
        let msg = "query failed";
        let fatal = false;
        try {
          const o = JSON.parse(data);
          msg = String(o.error);
          fatal = !!o.fatal;
        } catch {
          /* keep the generic message */
        }
        if (fatal) {
          s.close();
          h.state("closed");
        }
        h.error(msg, fatal);
      },
    },
  });
  return s;
}

// --- issue 15: node list, health, alerts and the event stream

// NodeState is one node of the dashboard's list (api/web/nodes).
export interface NodeState {
  name: string;
  up: boolean;
  group?: string;
}

export async function listNodes(o: CallOptions = {}): Promise<NodeState[]> {
  const body = (await request("nodes", "api/web/nodes", {}, o)) as { nodes?: unknown } | null;
  if (!body || !Array.isArray(body.nodes)) throw new ApiError("nodes", 200, "bad_answer", "no node list");
  const out: NodeState[] = [];
  for (const n of body.nodes as { name?: unknown; up?: unknown; group?: unknown }[]) {
    if (!n || typeof n.name !== "string" || n.name === "") continue;
    out.push({ name: n.name, up: n.up === true, group: typeof n.group === "string" && n.group !== "" ? n.group : undefined });
  }
  return out;
}

// HealthFailure is one failing check of a node (api/v1/health).
export interface HealthFailure {
  check: string;
  reason?: string;
  since?: string; // RFC 3339
}

// healthStatus returns the failing checks by node; nodes passing every
// check are absent. A server without the health endpoint answers 404.
export async function healthStatus(o: CallOptions = {}): Promise<Map<string, HealthFailure[]>> {
  const d = await prom<{ nodes?: unknown }>("health", "health", new URLSearchParams(), o, false);
  const out = new Map<string, HealthFailure[]>();
  if (!d || typeof d.nodes !== "object" || d.nodes === null) return out;
  for (const [node, list] of Object.entries(d.nodes as Record<string, unknown>)) {
    if (!Array.isArray(list)) continue;
    const checks: HealthFailure[] = [];
    for (const c of list as Record<string, unknown>[]) {
      if (!c || typeof c.check !== "string") continue;
      checks.push({ check: c.check, reason: typeof c.reason === "string" ? c.reason : undefined, since: typeof c.since === "string" ? c.since : undefined });
    }
    if (checks.length) out.set(node, checks);
  }
  return out;
}

// Alert is one active alert in the Prometheus API's shape (api/v1/alerts).
export interface Alert {
  labels: Labels;
  annotations: Labels;
  state: string; // "firing" | "pending"
  activeAt?: string;
  value?: string;
}

export async function listAlerts(o: CallOptions = {}): Promise<Alert[]> {
  const d = await prom<{ alerts?: unknown }>("alerts", "alerts", new URLSearchParams(), o, false);
  if (!d || !Array.isArray(d.alerts)) throw new ApiError("alerts", 200, "bad_answer", "data.alerts is not a list");
  const str = (m: unknown): Labels => {
    const out: Labels = {};
    if (m && typeof m === "object") for (const [k, v] of Object.entries(m)) if (typeof v === "string") out[k] = v;
    return out;
  };
  return (d.alerts as Record<string, unknown>[]).filter((a) => a && typeof a === "object").map((a) => ({
    labels: str(a.labels), annotations: str(a.annotations), state: String(a.state ?? ""),
    activeAt: typeof a.activeAt === "string" ? a.activeAt : undefined, value: typeof a.value === "string" ? a.value : undefined,
  }));
}

// VigilEvent is one entry of the event stream (internal/events.Event).
export interface VigilEvent {
  id: string; // the store's increasing id, kept as text (it is a uint64)
  time: number; // unix ms
  kind: string;
  node?: string;
  job?: string;
  severity: string;
  summary: string;
  labels?: Labels;
  link?: string;
}

// parseEvent checks one event as the server encodes it, or returns null.
export function parseEvent(v: unknown): VigilEvent | null {
  if (!v || typeof v !== "object") return null;
  const o = v as Record<string, unknown>;
  const t = typeof o.time === "string" ? Date.parse(o.time) : NaN;
  if ((typeof o.id !== "number" && typeof o.id !== "string") || Number.isNaN(t) || typeof o.kind !== "string") return null;
  const s = (x: unknown) => (typeof x === "string" && x !== "" ? x : undefined);
  const labels: Labels = {};
  if (o.labels && typeof o.labels === "object") for (const [k, x] of Object.entries(o.labels)) if (typeof x === "string") labels[k] = x;
  return {
    id: String(o.id), time: t, kind: o.kind, node: s(o.node), job: s(o.job), severity: s(o.severity) ?? "info",
    summary: typeof o.summary === "string" ? o.summary : "", labels, link: s(o.link),
  };
}

export interface EventPage {
  events: VigilEvent[];
  next: string; // id to pass as before= for older events, "" at the end
}

// listEvents asks the event store, newest first; params: since, until,
// kind, node, job, severity, limit, before.
export async function listEvents(params: URLSearchParams, o: CallOptions = {}): Promise<EventPage> {
  const d = await prom<{ events?: unknown; next?: unknown }>("events", "events", params, o, false);
  if (!d || (d.events !== null && d.events !== undefined && !Array.isArray(d.events))) throw new ApiError("events", 200, "bad_answer", "data.events is not a list");
  const events: VigilEvent[] = [];
  for (const e of (d.events as unknown[] | null) ?? []) {
    const p = parseEvent(e);
    if (p) events.push(p);
  }
  return { events, next: typeof d.next === "string" || typeof d.next === "number" ? String(d.next) : "" };
}

// streamEvents follows api/v1/events/stream (event: vigil, data: one
// event) with the filters of params().
export function streamEvents(params: () => URLSearchParams, h: { event(e: VigilEvent): void; state?(s: StreamState): void }, signal: AbortSignal): Stream {
  return openStream(() => {
    const qs = params().toString();
    return promBase + "events/stream" + (qs ? "?" + qs : "");
  }, {
    signal, state: h.state,
    on: {
      vigil(data) {
        let e: VigilEvent | null = null;
        try {
          e = parseEvent(JSON.parse(data));
        } catch {
          return;
        }
        if (e) h.event(e);
      },
    },
  });
}
