// The console's client of the operator routes (shared/contract.md): every
// request carries the admin token as Authorization: Bearer (never a
// cookie, so no other site can make the browser send it), JSON bodies go
// as application/json, and every answer resolves to an Answer, never a
// throw, so the console decides on `code` in one place.

/**
 * @typedef {object} Answer
 * @property {boolean} ok       2xx
 * @property {number} status   the HTTP status; 0 when no answer came
 * @property {object} body     the JSON body ({} when none)
 * @property {string} code     the error's code ('' when ok, 'network' when no answer)
 * @property {string} message  the error's message, for a person
 * @property {string} etag     the ETag header (a version), if any
 */

export class AdminApi {
  /** @param {{token: () => (string|null), fetch?: typeof fetch, base?: string}} o */
  constructor({ token, fetch = globalThis.fetch.bind(globalThis), base = '' }) {
    this.token = token;
    this.fetch = fetch;
    this.base = base;
  }

  /** @returns {Promise<Answer>} */
  async request(method, path, { body, ifMatch } = {}) {
    const headers = { Accept: 'application/json' };
    const tok = this.token();
    if (tok) headers.Authorization = `Bearer ${tok}`;
    if (ifMatch !== undefined) headers['If-Match'] = String(ifMatch);
    const init = { method, headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await this.fetch(this.base + path, init);
    } catch (err) {
      return { ok: false, status: 0, body: {}, code: 'network', message: 'The server did not answer.', etag: '' };
    }
    let parsed = {};
    try {
      parsed = await resp.json();
    } catch {
      parsed = {};
    }
    const err = (parsed && parsed.error) || {};
    return {
      ok: resp.ok,
      status: resp.status,
      body: parsed || {},
      code: resp.ok ? '' : err.code || `http_${resp.status}`,
      message: resp.ok ? '' : err.message || `HTTP ${resp.status}`,
      etag: resp.headers.get('ETag') || '',
    };
  }

  sku(s) {
    return `/admin/sales/${encodeURIComponent(s)}`;
  }

  sales() { return this.request('GET', '/admin/sales'); }
  sale(sku) { return this.request('GET', this.sku(sku)); }
  pause(sku, reason) { return this.request('POST', `${this.sku(sku)}/pause`, { body: reason ? { reason } : {} }); }
  resume(sku) { return this.request('POST', `${this.sku(sku)}/resume`, { body: {} }); }
  rebuild(sku) { return this.request('POST', `${this.sku(sku)}/rebuild`, { body: {} }); }
  /** patch changes the sale if it is still at version (412 version_conflict otherwise). */
  patch(sku, version, changes) { return this.request('PATCH', this.sku(sku), { body: changes, ifMatch: version }); }
  orders(sku) { return this.request('GET', `/admin/orders?sku=${encodeURIComponent(sku)}`); }
  /** moveOrder ships, cancels or refunds an order still at version. */
  moveOrder(id, to, version) {
    return this.request('POST', `/admin/orders/${encodeURIComponent(id)}/${to}`, { body: {}, ifMatch: version });
  }
  liveURL(sku) { return `${this.base}${this.sku(sku)}/live?history=900`; }
  listURL() { return `${this.base}/admin/live`; }
}
