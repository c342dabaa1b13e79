// The page's client of the flash-sale API (shared/contract.md): one method
// per route, each resolving to an Answer, never throwing for an HTTP error
// or a network failure, so the page decides on `code` in one place.

import { backoffDelay, parseRetryAfter } from './timing.js';

/**
 * @typedef {object} Answer
 * @property {boolean} ok          2xx
 * @property {number} status       the HTTP status; 0 when the request never got an answer
 * @property {object} body         the JSON body ({} when there was none)
 * @property {string} code         the error's code ('' when ok; 'network' when no answer)
 * @property {string} message      the error's message, for a person
 * @property {number} retryAfter   Retry-After in seconds (0 when absent)
 */

/** transient reports whether an answer is worth repeating as it is: no answer, or the server busy. */
export function transient(a) {
  if (a.status === 0) return true;
  if (a.code === 'sale_paused') return false; // a decision, not a hiccup
  return a.status >= 500;
}

export class Api {
  /**
   * @param {{sku: string, jwt?: () => (string|null), fetch?: typeof fetch, base?: string}} options
   */
  constructor({ sku, jwt = () => null, fetch = globalThis.fetch.bind(globalThis), base = '' }) {
    this.sku = sku;
    this.jwt = jwt;
    this.fetch = fetch;
    this.base = base.replace(/\/+$/, ''); // 'https://sale.example/' too: the server routes no '//'
  }

  saleURL(path = '') {
    return `${this.base}/sale/${encodeURIComponent(this.sku)}${path}`;
  }

  /**
   * request sends one request and reads its answer.
   * @returns {Promise<Answer>}
   */
  async request(method, url, { auth = false, headers = {}, body } = {}) {
    const h = { Accept: 'application/json', ...headers };
    if (auth) {
      const jwt = this.jwt();
      if (jwt) h.Authorization = `Bearer ${jwt}`;
    }
    const init = { method, headers: h, cache: 'no-store' };
    if (body !== undefined) {
      h['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await this.fetch(url, init);
    } catch (err) {
      return { ok: false, status: 0, body: {}, code: 'network', message: String(err), retryAfter: 0 };
    }
    let parsed = {};
    try {
      const text = await resp.text();
      parsed = text ? JSON.parse(text) : {};
    } catch {
      parsed = {}; // a proxy's HTML error page, say: the status still tells
    }
    const err = (parsed && parsed.error) || {};
    return {
      ok: resp.ok,
      status: resp.status,
      body: parsed || {},
      code: resp.ok ? '' : err.code || `http_${resp.status}`,
      message: resp.ok ? '' : err.message || '',
      retryAfter: parseRetryAfter(resp.headers.get('Retry-After')),
    };
  }

  sale() { return this.request('GET', this.saleURL()); }
  ticket() { return this.request('GET', this.saleURL('/ticket'), { auth: true }); }
  /**
   * status polls the place. The ticket travels in the X-Ticket header, out
   * of URLs, their logs and referrers; the shopper's JWT goes with it, so
   * that the room counts this poll as its owner's (a copy of the ticket
   * polled by someone else can then hold no one).
   */
  status(token) {
    return this.request('GET', this.saleURL('/status'), { auth: true, headers: { 'X-Ticket': token } });
  }
  register() { return this.request('POST', this.saleURL('/register'), { auth: true, body: {} }); }

  /** admission trades a solved proof of work for an admission token. */
  admission(token, salt, nonce) {
    return this.request('POST', this.saleURL('/admission'), { auth: true, body: { token, salt, nonce } });
  }

  /** reserve sends one reserve request; the caller owns the key (see reserveAttempt). */
  reserve(admissionToken, idempotencyKey, quantity) {
    return this.request('POST', this.saleURL('/reserve'), {
      auth: true,
      headers: { 'X-Admission-Token': admissionToken, 'Idempotency-Key': idempotencyKey },
      body: { quantity },
    });
  }

  reservation(id) { return this.request('GET', `${this.base}/reservations/${encodeURIComponent(id)}`, { auth: true }); }
  confirm(id, paymentRef) {
    return this.request('POST', `${this.base}/reservations/${encodeURIComponent(id)}/confirm`, { auth: true, body: { paymentRef } });
  }
  cancel(id) { return this.request('DELETE', `${this.base}/reservations/${encodeURIComponent(id)}`, { auth: true }); }

  /** demoToken asks a --demo server with the development key for a shopper JWT. */
  demoToken(user) { return this.request('GET', `${this.base}/demo/token?user=${encodeURIComponent(user)}`); }
}

/**
 * retrying repeats one request while its answers are transient (no answer,
 * or the server busy), waiting backoffDelay between tries, up to `tries`
 * in all. Every repeat is the same request: for a reserve that means the
 * same Idempotency-Key, so a repeat can never make a second reservation.
 *
 * @param {() => Promise<Answer>} send
 * @param {{tries?: number, sleep?: (ms: number) => Promise<void>,
 *          random?: () => number, onRetry?: (a: Answer, ms: number) => void}} [options]
 * @returns {Promise<Answer>} the first answer that is not transient, or the last one
 */
export async function retrying(send, options = {}) {
  const { tries = 4, sleep = (ms) => new Promise((r) => setTimeout(r, ms)), random = Math.random, onRetry = () => {} } = options;
  let a;
  for (let i = 1; ; i++) {
    a = await send();
    if (!transient(a) || i >= tries) return a;
    const ms = backoffDelay(i, a.retryAfter, random);
    onRetry(a, ms);
    await sleep(ms);
  }
}

/**
 * reserveAttempt is one attempt to reserve: a fresh Idempotency-Key,
 * reused on every retry of this attempt.
 *
 * @param {Api} api
 * @param {{admissionToken: string, quantity: number, newKey: () => string}} attempt
 * @param {Parameters<typeof retrying>[1]} [options]
 * @returns {Promise<Answer & {key: string}>}
 */
export async function reserveAttempt(api, { admissionToken, quantity, newKey }, options) {
  const key = newKey();
  const a = await retrying(() => api.reserve(admissionToken, key, quantity), options);
  return { ...a, key };
}
