import { decodeFrame, decodeNodes, type Frame, type NodeEntry } from "./frame";

export interface LiveHandlers {
  nodes(n: NodeEntry[]): void;
  frame(f: Frame, wireBytes: number): void;
  error(msg: string, fatal: boolean): void;
  state(s: "connecting" | "live" | "reconnecting" | "closed"): void;
}

// LiveStream wraps an EventSource on /api/web/live. EventSource reconnects
// by itself after network errors; a fatal queryerror closes it for good.
export class LiveStream {
  private es: EventSource;
  bytes = 0; // payload bytes of frame events received, for the status line

  constructor(expr: string, h: LiveHandlers) {
    h.state("connecting");
    this.es = new EventSource("api/web/live?expr=" + encodeURIComponent(expr));
    this.es.addEventListener("open", () => h.state("live"));
    this.es.addEventListener("nodes", (e) => {
      try {
        h.nodes(decodeNodes((e as MessageEvent).data));
      } catch (err) {
        h.error(String(err), false);
      }
    });
    this.es.addEventListener("frame", (e) => {
      const data = (e as MessageEvent).data as string;
      this.bytes += data.length;
      try {
        h.frame(decodeFrame(data), data.length + 21); // + "event: frame\ndata: " and blank line
      } catch (err) {
        h.error(String(err), false);
      }
    });
    this.es.addEventListener("queryerror", (e) => {
      let msg = "query failed";
      let fatal = false;
      try {
        const o = JSON.parse((e as MessageEvent).data);
        msg = String(o.error);
        fatal = !!o.fatal;
      } catch {
        /* keep the generic message */
      }
      if (fatal) {
        this.close();
        h.state("closed");
      }
      h.error(msg, fatal);
    });
    this.es.addEventListener("error", () => {
      if (this.es.readyState === EventSource.CLOSED) h.state("closed");
      else h.state("reconnecting");
    });
  }

  close(): void {
    this.es.close();
  }
}
