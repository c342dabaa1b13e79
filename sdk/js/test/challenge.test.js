// Unit tests of challenge.js: the page's reading of the answers the
// engine gives at POST /sale/{sku}/admission (their statuses and codes as
// httpapi sends them), and the salts it does not solve again.
// Run by sdk/js_test.go (go test ./sdk) and .ci/run (node --test).
import test from 'node:test';
import assert from 'node:assert/strict';
import { Api } from '../api.js';
import { afterAdmission, SpentSalts } from '../challenge.js';

/** answer is what Api makes of one HTTP answer to the admission route. */
async function answer(status, body, headers = {}) {
  const fetch = async () => new Response(body === undefined ? null : JSON.stringify(body), { status, headers });
  return new Api({ sku: 'kicks', jwt: () => 'JWT', fetch }).admission('ticket', 'salt', '42');
}

const error = (status, code, headers) => answer(status, { error: { code, message: `a ${code}` } }, headers);

test('each of the engine answers at the admission route has its decision', async () => {
  const cases = [
    [await answer(200, { admissionToken: 'adm', expiresIn: 120 }), 'admitted'],
    [await error(403, 'challenge_failed'), 'fresh_salt'],
    [await error(503, 'sale_paused', { 'Retry-After': '5' }), 'paused'],
    [await error(409, 'sold_out'), 'sold_out'],
    [await error(409, 'closed'), 'closed'],
    [await error(409, 'not_selected'), 'not_selected'],
    [await error(409, 'not_admitted', { 'Retry-After': '1' }), 'poll'],
    [await error(401, 'invalid_token'), 'poll'],
    [await error(429, 'rate_limited', { 'Retry-After': '2' }), 'poll'],
    [await error(401, 'unauthenticated'), 'sign_in'],
    [await error(503, 'unavailable', { 'Retry-After': '1' }), 'unavailable'],
    [await answer(502, undefined), 'unavailable'],
    [await error(400, 'bad_request'), 'fail'],
  ];
  for (const [a, want] of cases) {
    assert.equal(afterAdmission(a), want, `${a.status} ${a.code}`);
  }
});

test('a paused sale is a decision to wait, not a hiccup to show as "come back shortly"', async () => {
  const a = await error(503, 'sale_paused', { 'Retry-After': '5' });
  assert.equal(a.retryAfter, 5, 'the page polls at the pause\'s Retry-After');
  assert.notEqual(afterAdmission(a), 'unavailable');
});

test('a network failure is not a refusal: the salt may still be good', () => {
  assert.equal(afterAdmission({ ok: false, status: 0, body: {}, code: 'network', message: '', retryAfter: 0 }), 'unavailable');
});

test('SpentSalts remembers salts, a bounded number of them', () => {
  const spent = new SpentSalts(3);
  assert.equal(spent.has('a'), false);
  for (const s of ['a', 'b', 'a', 'c']) spent.add(s);
  assert.ok(spent.has('a') && spent.has('b') && spent.has('c'));
  spent.add('d');
  assert.equal(spent.has('a'), false, 'the oldest is forgotten first');
  assert.ok(spent.has('d'));
  spent.add('');
  spent.add(undefined);
  assert.equal(spent.has(''), false);
  assert.equal(spent.has(undefined), false);
});
