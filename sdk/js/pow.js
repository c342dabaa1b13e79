// The proof of work of the contract: find a nonce, a decimal string, such
// that SHA-256(salt + nonce) begins with at least difficultyBits zero bits.
import { PrefixHasher } from './sha256.js';

/**
 * solve searches nonces start, start+1, ... until one meets the difficulty.
 * It reports progress about every `every` tries, and gives up (returning
 * null) when shouldStop returns true at such a report.
 *
 * @param {string} salt
 * @param {number} difficultyBits
 * @param {{start?: number, every?: number,
 *          onProgress?: (tried: number) => void,
 *          shouldStop?: () => boolean}} [options]
 * @returns {{nonce: string, tried: number} | null}
 */
export function solve(salt, difficultyBits, options = {}) {
  const { start = 0, every = 8192, onProgress = () => {}, shouldStop = () => false } = options;
  const hasher = new PrefixHasher(salt);
  for (let n = start, tried = 1; n <= Number.MAX_SAFE_INTEGER; n++, tried++) {
    const nonce = String(n);
    if (hasher.zeroBits(nonce) >= difficultyBits) return { nonce, tried };
    if (tried % every === 0) {
      onProgress(tried);
      if (shouldStop()) return null;
    }
  }
  return null;
}

/**
 * expectedTries is how many nonces a search tries on average: each meets
 * the difficulty with probability 2^-difficultyBits.
 */
export function expectedTries(difficultyBits) {
  return 2 ** difficultyBits;
}
