// Unit tests of sha256.js and pow.js on the FIPS 180-4 examples; sdk/js_test.go
// also checks both against Go's crypto/sha256 on many more inputs.
import test from 'node:test';
import assert from 'node:assert/strict';
import { hex, leadingZeroBits, PrefixHasher, sha256 } from '../sha256.js';
import { solve } from '../pow.js';

test('the FIPS 180-4 examples', () => {
  assert.equal(hex(sha256('abc')), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(hex(sha256('')), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.equal(hex(sha256('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')),
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1');
  assert.equal(hex(sha256('a'.repeat(1_000_000))), 'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0');
});

test('strings are hashed as UTF-8', () => {
  assert.deepEqual(sha256('ü€'), sha256(new Uint8Array([0xc3, 0xbc, 0xe2, 0x82, 0xac])));
});

test('leadingZeroBits', () => {
  assert.equal(leadingZeroBits(new Uint8Array([0x80, 0])), 0);
  assert.equal(leadingZeroBits(new Uint8Array([0x01, 0xff])), 7);
  assert.equal(leadingZeroBits(new Uint8Array([0, 0, 0x10])), 19);
  assert.equal(leadingZeroBits(new Uint8Array(4)), 32);
});

test('PrefixHasher agrees with sha256 across block boundaries', () => {
  for (let n = 0; n < 140; n += 7) {
    const prefix = 'p'.repeat(n);
    const h = new PrefixHasher(prefix);
    for (const suffix of ['0', '9', '12345', '9999999999']) {
      assert.equal(h.zeroBits(suffix), leadingZeroBits(sha256(prefix + suffix)), `prefix ${n}, suffix ${suffix}`);
    }
  }
});

test('solve finds the first decimal nonce that meets the difficulty', () => {
  const found = solve('salt-1', 10);
  assert.match(found.nonce, /^\d+$/);
  assert.ok(leadingZeroBits(sha256(`salt-1${found.nonce}`)) >= 10);
  for (let n = 0; n < Number(found.nonce); n++) {
    assert.ok(leadingZeroBits(sha256(`salt-1${n}`)) < 10, `nonce ${n} was skipped`);
  }
  assert.equal(found.tried, Number(found.nonce) + 1);
});

test('solve reports progress and stops when told', () => {
  const reports = [];
  const out = solve('never', 64, { every: 100, onProgress: (n) => reports.push(n), shouldStop: () => reports.length >= 3 });
  assert.equal(out, null);
  assert.deepEqual(reports, [100, 200, 300]);
});
