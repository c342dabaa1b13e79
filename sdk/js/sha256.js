// SHA-256, as FIPS 180-4 describes it (sections 4.1.2, 4.2.2, 5.1.1,
// 5.3.3 and 6.2), for the waiting room's proof of work.
//
// Why not crypto.subtle.digest: it exists only in secure contexts (a phone
// on http://192.168.x.y:8080 has none), it is asynchronous per hash, which
// costs more than the hash itself for a 40-byte input, and the proof of
// work wants the first word of the digest, not 32 bytes in a promise.

// The constants are derived here rather than typed in: K[t] is the first 32
// bits of the fractional part of the cube root of the t-th prime (4.2.2),
// H0 those of the square roots of the first eight primes (5.3.3). Doubles
// carry about 50 bits below the point for these small roots, enough for 32
// exact bits; the tests check the digests against Go's crypto/sha256.
//
// Words are kept in Int32Arrays: the same 32 bits as the standard's
// unsigned words, but V8 keeps signed 32-bit values as small integers,
// where unsigned ones above 2^31 become doubles, several times slower.
function firstPrimes(n) {
  const primes = [];
  for (let c = 2; primes.length < n; c++) {
    if (primes.every((p) => c % p !== 0)) primes.push(c);
  }
  return primes;
}

function fractionBits(x) {
  return Math.floor((x - Math.floor(x)) * 0x100000000) >>> 0;
}

const PRIMES = firstPrimes(64);
const K = Int32Array.from(PRIMES, (p) => fractionBits(Math.cbrt(p)));
const H0 = Int32Array.from(PRIMES.slice(0, 8), (p) => fractionBits(Math.sqrt(p)));

// rotr is ROTR^n (3.2): a right rotation of a 32-bit word.
function rotr(x, n) {
  return (x >>> n) | (x << (32 - n));
}

// compress applies the SHA-256 compression function (6.2.2) to one
// 64-byte block of `bytes` starting at `offset`, updating the hash value H
// in place. W is a 64-word scratch array, passed in so that a tight loop
// allocates nothing.
function compress(H, bytes, offset, W) {
  for (let t = 0; t < 16; t++) {
    const i = offset + 4 * t;
    W[t] = (bytes[i] << 24) | (bytes[i + 1] << 16) | (bytes[i + 2] << 8) | bytes[i + 3];
  }
  for (let t = 16; t < 64; t++) {
    const w15 = W[t - 15];
    const w2 = W[t - 2];
    const s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >>> 3); // σ0
    const s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >>> 10); // σ1
    W[t] = (s1 + W[t - 7] + s0 + W[t - 16]) | 0;
  }
  let a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], h = H[7];
  for (let t = 0; t < 64; t++) {
    const S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25); // Σ1
    const ch = (e & f) ^ (~e & g);
    const T1 = (h + S1 + ch + K[t] + W[t]) | 0;
    const S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22); // Σ0
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const T2 = (S0 + maj) | 0;
    h = g; g = f; f = e; e = (d + T1) | 0;
    d = c; c = b; b = a; a = (T1 + T2) | 0;
  }
  H[0] = (H[0] + a) | 0; H[1] = (H[1] + b) | 0; H[2] = (H[2] + c) | 0; H[3] = (H[3] + d) | 0;
  H[4] = (H[4] + e) | 0; H[5] = (H[5] + f) | 0; H[6] = (H[6] + g) | 0; H[7] = (H[7] + h) | 0;
}

// paddedLength is the length of a message of n bytes after padding (5.1.1):
// a 1 bit, zeros, and the 64-bit length, to a multiple of 64 bytes.
function paddedLength(n) {
  return Math.ceil((n + 9) / 64) * 64;
}

// pad writes the padding into buf after its first n bytes, for a message
// of total bytes in all (more than n when buf holds only its tail); buf is
// paddedLength(n) long.
function pad(buf, n, total = n) {
  buf[n] = 0x80;
  buf.fill(0, n + 1);
  // The length in bits, big-endian. Messages here are far below 2^32
  // bits, but the high word is written honestly for any length JS can hold.
  const bits = total * 8;
  const end = buf.length;
  const high = Math.floor(bits / 0x100000000);
  const low = bits >>> 0;
  buf[end - 8] = high >>> 24; buf[end - 7] = high >>> 16; buf[end - 6] = high >>> 8; buf[end - 5] = high;
  buf[end - 4] = low >>> 24; buf[end - 3] = low >>> 16; buf[end - 2] = low >>> 8; buf[end - 1] = low;
}

function digestBytes(H) {
  const out = new Uint8Array(32);
  for (let i = 0; i < 8; i++) {
    out[4 * i] = H[i] >>> 24;
    out[4 * i + 1] = H[i] >>> 16;
    out[4 * i + 2] = H[i] >>> 8;
    out[4 * i + 3] = H[i];
  }
  return out;
}

/**
 * sha256 returns the SHA-256 digest of a message: a Uint8Array of bytes,
 * or a string, which is hashed as its UTF-8 encoding.
 * @param {Uint8Array|string} message
 * @returns {Uint8Array} the 32-byte digest
 */
export function sha256(message) {
  const bytes = typeof message === 'string' ? new TextEncoder().encode(message) : message;
  const buf = new Uint8Array(paddedLength(bytes.length));
  buf.set(bytes);
  pad(buf, bytes.length);
  const H = Int32Array.from(H0);
  const W = new Int32Array(64);
  for (let off = 0; off < buf.length; off += 64) compress(H, buf, off, W);
  return digestBytes(H);
}

/** hex returns the bytes as lower-case hexadecimal. */
export function hex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * leadingZeroBits counts the zero bits a digest starts with.
 * @param {Uint8Array} digest
 */
export function leadingZeroBits(digest) {
  let n = 0;
  for (const b of digest) {
    if (b !== 0) return n + Math.clz32(b) - 24;
    n += 8;
  }
  return n;
}

/**
 * PrefixHasher hashes many messages that share a prefix, as the proof of
 * work does (salt + nonce for nonce = 0, 1, 2, ...): the prefix's whole
 * blocks are compressed once, and each message costs only its tail's one
 * or two blocks, with no allocation.
 */
export class PrefixHasher {
  /** @param {Uint8Array|string} prefix */
  constructor(prefix) {
    const bytes = typeof prefix === 'string' ? new TextEncoder().encode(prefix) : prefix;
    const whole = bytes.length - (bytes.length % 64);
    this.mid = Int32Array.from(H0);
    this.W = new Int32Array(64);
    for (let off = 0; off < whole; off += 64) compress(this.mid, bytes, off, this.W);
    this.prefixLength = bytes.length;
    this.rest = bytes.slice(whole); // fewer than 64 bytes
    this.H = new Int32Array(8);
    this.tails = new Map(); // padded tail buffers by the suffix's length
  }

  /**
   * zeroBits hashes prefix + suffix (suffix an ASCII string, as a decimal
   * nonce is) and returns how many zero bits the digest starts with.
   * @param {string} suffix
   */
  zeroBits(suffix) {
    const n = this.rest.length + suffix.length;
    let buf = this.tails.get(suffix.length);
    if (!buf) {
      buf = new Uint8Array(paddedLength(n));
      buf.set(this.rest);
      this.tails.set(suffix.length, buf);
    }
    for (let i = 0; i < suffix.length; i++) buf[this.rest.length + i] = suffix.charCodeAt(i);
    // The padding depends on the whole message's length, prefix included.
    pad(buf, n, this.prefixLength + suffix.length);
    const H = this.H;
    H.set(this.mid);
    for (let off = 0; off < buf.length; off += 64) compress(H, buf, off, this.W);
    let bits = 0;
    for (let i = 0; i < 8; i++) {
      if (H[i] !== 0) return bits + Math.clz32(H[i]);
      bits += 32;
    }
    return bits;
  }
}
