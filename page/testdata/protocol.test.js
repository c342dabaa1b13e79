// Unit tests of protocol.js, the waiting room's protocol apart from any
// page: it runs here with no DOM at all, against a fake fetch, and
// reports states that a page (or a storefront) shows.
// Run by page/js_test.go (go test ./page).
import test from 'node:test';
import assert from 'node:assert/strict';
import { Api } from './api.js';
import { WaitingRoom } from './protocol.js';

function memoryStorage() {
  const m = new Map();
  return { get: (k) => (m.has(k) ? m.get(k) : null), set: (k, v) => m.set(k, v), del: (k) => m.delete(k) };
}

/** A JWT for user: the protocol only reads its sub (the server verifies it). */
const jwt = (user) => `h.${Buffer.from(JSON.stringify({ sub: user })).toString('base64url')}.s`;

/** server answers routes from a table of handlers, recording each request. */
function server(routes) {
  const requests = [];
  const fetch = async (url, init) => {
    requests.push({ url, ...init });
    const path = url.split('?')[0];
    const handler = routes[`${init.method} ${path}`];
    if (!handler) return new Response(JSON.stringify({ error: { code: 'not_found' } }), { status: 404 });
    const { status = 200, body, headers = {} } = handler(url, init);
    return new Response(JSON.stringify(body), { status, headers });
  };
  return { fetch, requests };
}

const sale = { sku: 'kicks', name: 'Kicks', state: 'scheduled', opensAt: '2026-08-01T10:00:00Z', policy: { fairness: 'fifo', perUserLimit: 2, holdSeconds: 600 } };

function room(routes) {
  const { fetch, requests } = server({ 'GET /sale/kicks': () => ({ body: sale }), ...routes });
  const states = [];
  const r = new WaitingRoom({ api: new Api({ sku: 'kicks', fetch }), storage: memoryStorage(), onState: (s) => states.push(s) });
  return { r, states, requests };
}

test('a shopper takes a place and is told it before the open, the ticket in a header', async () => {
  const { r, states, requests } = room({
    'GET /sale/kicks/ticket': () => ({ body: { token: 'T1', position: 4, estimatedWaitSeconds: 90 } }),
    'GET /sale/kicks/status': () => ({ body: { state: 'scheduled', opensInSeconds: 30, position: 4 }, headers: { 'Retry-After': '2' } }),
  });
  await r.boot(jwt('ann'));
  r.stop();
  assert.deepEqual(states.map((s) => s.view), ['loading', 'scheduled']);
  assert.deepEqual(states[1], { view: 'scheduled', opensIn: 30, position: 4, fairness: 'fifo' });
  const poll = requests.find((q) => q.url.includes('/status'));
  assert.equal(poll.headers['X-Ticket'], 'T1');
  assert.equal(poll.url, '/sale/kicks/status');
  assert.equal(poll.headers.Authorization, `Bearer ${jwt('ann')}`);
  assert.equal(requests.find((q) => q.url.endsWith('/ticket')).headers.Authorization, `Bearer ${jwt('ann')}`);
});

test('waiting, then the turn: figures as numbers, the limit from the sale', async () => {
  let n = 0;
  const { r, states } = room({
    'GET /sale/kicks/ticket': () => ({ body: { token: 'T1', position: 9 } }),
    'GET /sale/kicks/status': () => (++n === 1
      ? { body: { state: 'waiting', position: 9, estimatedWaitSeconds: 12, unitsLeft: 5, chance: 'possible' }, headers: { 'Retry-After': '1' } }
      : { body: { state: 'admitted', admissionToken: 'A', expiresIn: 120 } }),
  });
  await r.boot(jwt('bo'));
  assert.deepEqual(states.at(-1), { view: 'waiting', position: 9, firstPosition: 9, wait: 12, unitsLeft: 5, chance: 'possible' });
  await r.poll();
  r.stop();
  assert.deepEqual(states.at(-1), { view: 'admitted', expiresIn: 120, limit: 2 });
});

test('no sign-in: the protocol asks for one; a pasted token that is none is refused', async () => {
  const { r, states } = room({});
  await r.boot(null);
  assert.deepEqual(states.at(-1), { view: 'signin', reason: '' });
  assert.equal(r.signInWith('not a jwt'), false);
  assert.deepEqual(states.at(-1), { view: 'signin', reason: 'notToken' });
  r.stop();
});

test('an unknown sale is an error with a reason the page words', async () => {
  const { fetch } = server({});
  const states = [];
  const r = new WaitingRoom({ api: new Api({ sku: 'nope', fetch }), storage: memoryStorage(), onState: (s) => states.push(s) });
  await r.boot(jwt('cy'));
  assert.deepEqual(states.at(-1), { view: 'error', reason: 'noSale', code: 'not_found' });
});
