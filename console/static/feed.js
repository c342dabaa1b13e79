// The live feed over fetch(): EventSource cannot send the admin token in
// an Authorization header, so the console reads the text/event-stream
// itself, from a ReadableStream, and reconnects the way EventSource would
// (after the server's retry, with Last-Event-ID, so it resumes where it
// left off). Unit tested by console/testdata/feed.test.js.

/**
 * SSEParser turns the text of an event stream, fed in arbitrary chunks,
 * into events ({id, event, data}), as the HTML standard's parser does for
 * the fields the server sends: comments and unknown fields are ignored;
 * `retry` sets the reconnection delay.
 */
export class SSEParser {
  constructor() {
    this.buf = '';
    this.lastId = '';
    this.retry = 0;
    this.reset();
  }

  reset() {
    this.event = '';
    this.data = [];
  }

  /** push feeds a chunk of text and returns the events it completed. */
  push(text) {
    this.buf += text;
    const out = [];
    let nl;
    while ((nl = this.buf.search(/\r\n|\r|\n/)) >= 0) {
      // A CR that ends the chunk may be the first half of a CRLF: wait
      // for the next chunk to tell.
      if (this.buf[nl] === '\r' && nl === this.buf.length - 1) break;
      const line = this.buf.slice(0, nl);
      const len = this.buf.startsWith('\r\n', nl) ? 2 : 1;
      this.buf = this.buf.slice(nl + len);
      if (line === '') {
        if (this.data.length > 0) {
          out.push({ id: this.lastId, event: this.event || 'message', data: this.data.join('\n') });
        }
        this.reset();
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      switch (field) {
        case 'event': this.event = value; break;
        case 'data': this.data.push(value); break;
        case 'id': if (!value.includes('\0')) this.lastId = value; break;
        case 'retry': if (/^\d+$/.test(value)) this.retry = Number(value); break;
        default: break;
      }
    }
    return out;
  }
}

/** reconnectDelay is how long to wait before the n-th reconnection in a row (n from 1): the server's retry, then doubling to 30 s. */
export function reconnectDelay(retryMs, n) {
  const base = retryMs > 0 ? retryMs : 2000;
  return Math.min(30000, base * 2 ** Math.max(0, n - 1));
}

/**
 * Feed is one live stream, kept open: it reconnects after an error or the
 * server closing it (a restart, a deploy) until stopped, resuming with
 * Last-Event-ID. A 401 stops it: the token is wrong, and asking again
 * will not help.
 */
export class Feed {
  /**
   * @param {object} o
   * @param {string} o.url
   * @param {() => (string|null)} o.token
   * @param {(ev: {id: string, event: string, data: string}) => void} o.onEvent
   * @param {(state: string, detail?: string) => void} o.onState  'connecting', 'live', 'retrying', 'unauthorized', 'gone', 'stopped'
   * @param {typeof fetch} [o.fetch]
   * @param {(f: () => void, ms: number) => any} [o.setTimeout]
   */
  constructor({ url, token, onEvent, onState, fetch = globalThis.fetch.bind(globalThis), setTimeout = globalThis.setTimeout.bind(globalThis) }) {
    Object.assign(this, { url, token, onEvent, onState, fetch, setTimeout });
    this.parser = new SSEParser();
    this.failures = 0;
    this.stopped = false;
    this.ctrl = null;
  }

  start() {
    this.stopped = false;
    this.connect();
    return this;
  }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
    this.onState('stopped');
  }

  async connect() {
    if (this.stopped) return;
    this.onState(this.failures ? 'retrying' : 'connecting');
    const headers = { Accept: 'text/event-stream' };
    const tok = this.token();
    if (tok) headers.Authorization = `Bearer ${tok}`;
    if (this.parser.lastId) headers['Last-Event-ID'] = this.parser.lastId;
    // A half-read event from a dropped connection is not completed by the
    // next one.
    this.parser.buf = '';
    this.parser.reset();
    this.ctrl = new AbortController();
    let resp;
    try {
      resp = await this.fetch(this.url, { headers, cache: 'no-store', signal: this.ctrl.signal });
    } catch {
      return this.again();
    }
    if (resp.status === 401 || resp.status === 403) {
      this.stopped = true;
      this.onState('unauthorized', String(resp.status));
      return;
    }
    if (resp.status === 404) {
      this.stopped = true;
      this.onState('gone');
      return;
    }
    if (!resp.ok || !resp.body) return this.again();
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let live = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        for (const ev of this.parser.push(value)) {
          if (!live) {
            live = true;
            this.failures = 0;
            this.onState('live');
          }
          this.onEvent(ev);
        }
      }
    } catch {
      // Aborted, or the connection dropped: reconnect below unless stopped.
    }
    this.again();
  }

  again() {
    if (this.stopped) return;
    this.failures++;
    this.onState('retrying');
    this.setTimeout(() => this.connect(), reconnectDelay(this.parser.retry, this.failures));
  }
}
