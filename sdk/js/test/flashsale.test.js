// Unit tests of flashsale.js, the SDK's waiting room apart from any page:
// it runs here with no DOM at all, against a fake fetch, and dispatches
// the events a page (or a storefront) shows.
// Run by sdk/js_test.go (go test ./sdk) and .ci/run (node --test).
import test, { mock } from 'node:test';
import assert from 'node:assert/strict';
import { Api } from '../api.js';
import { WaitingRoom } from '../flashsale.js';

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

/** listen records the room's `state` events' details, and every event by name. */
function listen(r) {
  const states = [];
  const events = [];
  r.addEventListener('state', (e) => states.push(e.detail));
  for (const type of ['signin', 'register', 'scheduled', 'position', 'challenge', 'turn', 'reserved', 'confirmed',
    'soldout', 'notselected', 'cancelled', 'expired', 'paused', 'closed', 'unavailable', 'error', 'note']) {
    r.addEventListener(type, (e) => events.push({ type, ...e.detail }));
  }
  return { states, events };
}

function room(routes, options = {}) {
  const { fetch, requests } = server({ 'GET /sale/kicks': () => ({ body: sale }), ...routes });
  const r = new WaitingRoom({ api: new Api({ sku: 'kicks', fetch }), storage: memoryStorage(), ...options });
  return { r, requests, ...listen(r) };
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
  assert.deepEqual(states.at(-1), { view: 'admitted', expiresIn: 120, limit: 2, admissionToken: 'A' });
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
  const r = new WaitingRoom({ api: new Api({ sku: 'nope', fetch }), storage: memoryStorage() });
  const { states } = listen(r);
  await r.boot(jwt('cy'));
  assert.deepEqual(states.at(-1), { view: 'error', reason: 'noSale', code: 'not_found' });
});

test('each state is also an event of its own name: position, turn, soldout, paused, closed', async () => {
  const answers = [
    { body: { state: 'waiting', position: 3, estimatedWaitSeconds: 4 }, headers: { 'Retry-After': '2' } },
    { body: { state: 'paused' }, headers: { 'Retry-After': '5' } },
    { body: { state: 'admitted', admissionToken: 'A', expiresIn: 60 } },
    { body: { state: 'sold_out', final: false }, headers: { 'Retry-After': '1' } },
    { body: { state: 'sold_out', final: true } },
    { body: { state: 'not_selected' } },
    { body: { state: 'closed' } },
  ];
  const { r, events } = room({
    'GET /sale/kicks/ticket': () => ({ body: { token: 'T1', position: 3 } }),
    'GET /sale/kicks/status': () => answers.shift(),
  });
  await r.boot(jwt('di'));
  while (answers.length) await r.poll();
  r.close();
  assert.deepEqual(events.map((e) => e.type),
    ['position', 'paused', 'turn', 'soldout', 'soldout', 'notselected', 'closed']);
  assert.equal(events[0].position, 3);
  assert.equal(events[2].admissionToken, 'A');
  assert.deepEqual(events.filter((e) => e.type === 'soldout').map((e) => e.final), [false, true]);
});

test('the next poll comes no sooner than Retry-After, jittered upwards', async () => {
  for (const retryAfter of [1, 2, 7, 30]) {
    const delays = [];
    const { r } = room({
      'GET /sale/kicks/ticket': () => ({ body: { token: 'T1', position: 3 } }),
      'GET /sale/kicks/status': () => ({ body: { state: 'waiting', position: 3 }, headers: { 'Retry-After': String(retryAfter) } }),
    });
    r.later = (name, fn, ms) => delays.push(ms);
    await r.boot(jwt('ed'));
    for (let i = 0; i < 20; i++) await r.poll();
    for (const ms of delays) {
      assert.ok(ms >= retryAfter * 1000 && ms <= retryAfter * 1300, `Retry-After ${retryAfter}: polled again after ${ms} ms`);
    }
    assert.equal(delays.length, 21);
    assert.ok(new Set(delays).size > 1, 'the delays are jittered');
  }
});

test('a busy server is retried with backoff, never at once, and says unavailable', async () => {
  const delays = [];
  const { r, events } = room({
    'GET /sale/kicks/ticket': () => ({ status: 503, body: { error: { code: 'unavailable' } }, headers: { 'Retry-After': '9' } }),
  });
  r.later = (name, fn, ms) => delays.push(ms);
  await r.boot(jwt('fa'));
  assert.equal(events.at(-1).type, 'unavailable');
  assert.ok(delays[0] >= 9000, `retried after ${delays[0]} ms`);
});

test('reserve repeats the same Idempotency-Key after a 503 and a lost answer, then holds', async () => {
  const reserves = [
    { status: 503, body: { error: { code: 'unavailable' } }, headers: { 'Retry-After': '1' } },
    'network',
    { status: 201, body: { reservationId: 'res_1', expiresAt: '2026-08-01T10:10:00Z', quantity: 2 } },
  ];
  const requests = [];
  const routes = {
    'GET /sale/kicks': () => ({ body: sale }),
    'GET /sale/kicks/ticket': () => ({ body: { token: 'T1', position: 1 } }),
    'GET /sale/kicks/status': () => ({ body: { state: 'admitted', admissionToken: 'A', expiresIn: 60 } }),
    'GET /reservations/res_1': () => ({ body: { reservationId: 'res_1', state: 'pending', quantity: 2, expiresIn: 599 } }),
  };
  const fetch = async (url, init) => {
    requests.push({ url, ...init });
    if (`${init.method} ${url}` === 'POST /sale/kicks/reserve') {
      const next = reserves.shift();
      if (next === 'network') throw new TypeError('Failed to fetch');
      return new Response(JSON.stringify(next.body), { status: next.status, headers: next.headers || {} });
    }
    const { status = 200, body, headers = {} } = routes[`${init.method} ${url}`](url, init);
    return new Response(JSON.stringify(body), { status, headers });
  };
  const r = new WaitingRoom({ api: new Api({ sku: 'kicks', fetch }), storage: memoryStorage() });
  const { events } = listen(r);
  await r.boot(jwt('gus'));
  assert.equal(events.at(-1).type, 'turn');
  // The retries' waits, made instant: the test is about the keys.
  const realSetTimeout = globalThis.setTimeout;
  mock.method(globalThis, 'setTimeout', (fn, ms, ...args) => realSetTimeout(fn, ms > 1000 ? 0 : ms, ...args));
  try {
    const a = await r.reserve(2);
    assert.equal(a.ok, true);
    assert.equal(a.body.reservationId, 'res_1');
  } finally {
    mock.restoreAll();
    r.close();
  }
  const keys = requests.filter((q) => q.url.endsWith('/reserve')).map((q) => q.headers['Idempotency-Key']);
  assert.equal(keys.length, 3);
  assert.equal(new Set(keys).size, 1, `keys: ${keys}`);
  assert.match(keys[0], /^[0-9a-f]{32}$/);
  const reserve = requests.find((q) => q.url.endsWith('/reserve'));
  assert.equal(reserve.headers['X-Admission-Token'], 'A');
  assert.deepEqual(JSON.parse(reserve.body), { quantity: 2 });
  assert.ok(events.some((e) => e.type === 'note' && e.key === 'reserve.busy'));
  assert.deepEqual(events.filter((e) => e.type === 'reserved').at(-1), { type: 'reserved', view: 'reserved', expiresIn: 599, quantity: 2, reservationId: 'res_1' });
  // A second reserve without a turn does nothing.
  assert.equal(await r.reserve(1), null);
});

/** FakeWorker stands in for pow-worker.js: it solves with pow.js, in this thread. */
class FakeWorker {
  constructor(log) { this.log = log; this.terminated = false; }
  postMessage(m) {
    this.log.push(m);
    setImmediate(async () => {
      const { solve } = await import('../pow.js');
      const found = solve(m.salt, m.difficultyBits);
      if (!this.terminated) this.onmessage({ data: { type: 'solved', nonce: found.nonce, tried: found.tried, elapsedMs: 5 } });
    });
  }
  terminate() { this.terminated = true; }
}

test('a challenge is solved in the worker and traded for the turn; the salt is not solved twice', async () => {
  const posted = [];
  const admissions = [];
  const challenge = { algorithm: 'sha256', salt: 'c2FsdA', difficultyBits: 8, expiresIn: 60 };
  const statuses = [{ body: { state: 'challenge', challenge } }, { body: { state: 'challenge', challenge } }];
  const { r, events } = room({
    'GET /sale/kicks/ticket': () => ({ body: { token: 'T1', position: 1 } }),
    'GET /sale/kicks/status': () => statuses.shift(),
    'POST /sale/kicks/admission': (url, init) => {
      admissions.push(JSON.parse(init.body));
      return { body: { admissionToken: 'A2', expiresIn: 90 } };
    },
  }, { newWorker: () => new FakeWorker(posted) });
  const turn = new Promise((resolve) => r.addEventListener('turn', (e) => resolve(e.detail), { once: true }));
  await r.boot(jwt('hal'));
  const detail = await turn;
  assert.equal(detail.admissionToken, 'A2');
  assert.deepEqual(posted, [{ salt: 'c2FsdA', difficultyBits: 8 }]);
  assert.equal(admissions.length, 1);
  assert.equal(admissions[0].token, 'T1');
  assert.equal(admissions[0].salt, 'c2FsdA');
  assert.match(admissions[0].nonce, /^\d+$/);
  assert.deepEqual(events.filter((e) => e.type === 'challenge').map((e) => e.phase), ['starting', 'solved']);
  // The same salt offered again (the room hands it out for a while): not solved again.
  r.later = () => {};
  await r.poll();
  r.close();
  assert.equal(posted.length, 1);
  assert.equal(events.at(-1).phase, 'reused');
});

test('a storefront gives the room its server and JWT; nothing is kept but the ticket', async () => {
  const requests = [];
  const storage = memoryStorage();
  const fetch = async (url, init) => {
    requests.push({ url, ...init });
    const body = url.endsWith('/ticket') ? { token: 'T9', position: 2 } : url.endsWith('/status') ? { state: 'closed' } : sale;
    return new Response(JSON.stringify(body), { status: 200 });
  };
  const r = new WaitingRoom({ api: new Api({ sku: 'kicks', base: 'https://queue.example', fetch }), storage, jwt: jwt('ivy') });
  const { events } = listen(r);
  await r.boot();
  r.close();
  // (The sale is read again when the view changes, for what it says after the open.)
  assert.deepEqual(requests.map((q) => q.url).slice(0, 3), ['https://queue.example/sale/kicks', 'https://queue.example/sale/kicks/ticket', 'https://queue.example/sale/kicks/status']);
  assert.ok(requests.every((q) => q.url.startsWith('https://queue.example/')));
  assert.equal(events.at(-1).type, 'closed');
  assert.equal(storage.get('flashsale:jwt'), null);
  assert.equal(storage.get('flashsale:ticket:kicks:ivy'), 'T9');
});
