// Unit tests of api.js against the contract's shapes, with a fake fetch.
// Run by sdk/js_test.go (go test ./sdk) and .ci/run (node --test).
import test from 'node:test';
import assert from 'node:assert/strict';
import { Api, reserveAttempt, retrying, transient } from '../api.js';

/** fakeFetch answers requests from a list of answers, recording each request. */
function fakeFetch(answers) {
  const requests = [];
  const fetch = async (url, init) => {
    requests.push({ url, ...init });
    const next = answers.shift();
    if (!next) throw new Error('no more answers');
    if (next === 'network') throw new TypeError('Failed to fetch');
    const { status, body, headers = {} } = next;
    return new Response(body === undefined ? null : typeof body === 'string' ? body : JSON.stringify(body), { status, headers });
  };
  return { fetch, requests };
}

const error = (code, status, headers) => ({ status, headers, body: { error: { code, message: `a ${code}` } } });
const noSleep = { sleep: async () => {}, random: () => 0.5 };

test('request reads the contract error shape and Retry-After', async () => {
  const { fetch } = fakeFetch([error('unavailable', 503, { 'Retry-After': '7' })]);
  const api = new Api({ sku: 'kicks', jwt: () => null, fetch });
  const a = await api.status('t');
  assert.deepEqual([a.ok, a.status, a.code, a.message, a.retryAfter], [false, 503, 'unavailable', 'a unavailable', 7]);
  assert.ok(transient(a));
});

test('a network failure is an answer with status 0, not an exception', async () => {
  const { fetch } = fakeFetch(['network']);
  const a = await new Api({ sku: 'kicks', jwt: () => null, fetch }).sale();
  assert.deepEqual([a.ok, a.status, a.code], [false, 0, 'network']);
  assert.ok(transient(a));
});

test('a body that is not JSON (a proxy page) still gives the status', async () => {
  const { fetch } = fakeFetch([{ status: 502, body: '<html>bad gateway</html>' }]);
  const a = await new Api({ sku: 'kicks', jwt: () => null, fetch }).sale();
  assert.deepEqual([a.status, a.code], [502, 'http_502']);
});

test('routes, headers and bodies follow the contract', async () => {
  const { fetch, requests } = fakeFetch(Array.from({ length: 9 }, () => ({ status: 200, body: {} })));
  const api = new Api({ sku: 'a b', jwt: () => 'JWT', fetch });
  await api.sale();
  await api.ticket();
  await api.status('tok+/=');
  await api.register();
  await api.admission('tok', 'salt', '42');
  await api.reserve('adm', 'key-1', 2);
  await api.confirm('res_1', 'pay-1');
  await api.cancel('res_1');
  await api.demoToken('ann');
  const lines = requests.map((r) => `${r.method} ${r.url}`);
  assert.deepEqual(lines, [
    'GET /sale/a%20b',
    'GET /sale/a%20b/ticket',
    'GET /sale/a%20b/status',
    'POST /sale/a%20b/register',
    'POST /sale/a%20b/admission',
    'POST /sale/a%20b/reserve',
    'POST /reservations/res_1/confirm',
    'DELETE /reservations/res_1',
    'GET /demo/token?user=ann',
  ]);
  assert.equal(requests[0].headers.Authorization, undefined, 'the sale view needs no sign-in');
  assert.equal(requests[1].headers.Authorization, 'Bearer JWT');
  assert.equal(requests[2].headers['X-Ticket'], 'tok+/=', 'the ticket travels in a header, not the URL');
  assert.equal(requests[2].headers.Authorization, 'Bearer JWT', 'a poll carries its owner\'s JWT');
  // The ticket travels in X-Ticket (the query carries it too, until every
  // server reads the header).
  assert.equal(requests[2].headers['X-Ticket'], 'tok+/=');
  assert.deepEqual(JSON.parse(requests[4].body), { token: 'tok', salt: 'salt', nonce: '42' });
  assert.equal(requests[5].headers['X-Admission-Token'], 'adm');
  assert.equal(requests[5].headers['Idempotency-Key'], 'key-1');
  assert.deepEqual(JSON.parse(requests[5].body), { quantity: 2 });
  assert.deepEqual(JSON.parse(requests[6].body), { paymentRef: 'pay-1' });
});

test('one reserve attempt reuses its Idempotency-Key on every retry', async () => {
  const { fetch, requests } = fakeFetch([
    'network',
    error('unavailable', 503, { 'Retry-After': '3' }),
    { status: 201, body: { reservationId: 'res_1', expiresAt: '2026-08-01T10:10:00Z', quantity: 1 } },
  ]);
  const api = new Api({ sku: 'kicks', jwt: () => 'JWT', fetch });
  const waits = [];
  let keys = 0;
  const a = await reserveAttempt(api, { admissionToken: 'adm', quantity: 1, newKey: () => `key-${++keys}` }, {
    sleep: async (ms) => { waits.push(ms); },
    random: () => 0,
  });
  assert.equal(a.status, 201);
  assert.equal(a.key, 'key-1');
  assert.deepEqual(requests.map((r) => r.headers['Idempotency-Key']), ['key-1', 'key-1', 'key-1']);
  assert.deepEqual(waits, [2000, 4000]);

  // The next attempt (the shopper presses again) has a fresh key.
  const again = fakeFetch([error('sold_out', 409)]);
  const b = await reserveAttempt(new Api({ sku: 'kicks', jwt: () => 'JWT', fetch: again.fetch }),
    { admissionToken: 'adm', quantity: 1, newKey: () => `key-${++keys}` }, noSleep);
  assert.equal(b.key, 'key-2');
  assert.equal(again.requests[0].headers['Idempotency-Key'], 'key-2');
});

test('decisions are not retried: sold out, paused, limits', async () => {
  for (const [code, status] of [['sold_out', 409], ['sale_paused', 503], ['limit_reached', 409], ['rate_limited', 429], ['admission_used', 403]]) {
    const { fetch, requests } = fakeFetch([error(code, status), { status: 201, body: {} }]);
    const a = await retrying(() => new Api({ sku: 'k', jwt: () => 'J', fetch }).reserve('adm', 'k1', 1), noSleep);
    assert.equal(a.code, code);
    assert.equal(requests.length, 1, `${code} was retried`);
  }
});

test('retrying gives up after its tries, never looping', async () => {
  const { fetch, requests } = fakeFetch(Array.from({ length: 10 }, () => error('unavailable', 503)));
  const waits = [];
  const a = await retrying(() => new Api({ sku: 'k', jwt: () => 'J', fetch }).status('t'), {
    tries: 4, random: () => 0, sleep: async (ms) => { waits.push(ms); },
  });
  assert.equal(a.code, 'unavailable');
  assert.equal(requests.length, 4);
  assert.ok(waits.every((ms) => ms >= 1000), `waits ${waits}`);
});

test('a base address with a trailing slash makes no doubled slash', async () => {
  const { fetch, requests } = fakeFetch([{ status: 200, body: {} }]);
  await new Api({ sku: 'kicks', base: 'https://sale.example/', fetch }).sale();
  assert.equal(requests[0].url, 'https://sale.example/sale/kicks');
});
