// The proof-of-work search, off the page's main thread so the page stays
// responsive (and its countdowns keep ticking) while the phone works.
//
// In:  {salt, difficultyBits}
// Out: {type: 'progress', tried, elapsedMs} now and then,
//      {type: 'solved', nonce, tried, elapsedMs} once.
// The page ends the worker (terminate) if the challenge expires first.
import { solve } from './pow.js';

self.onmessage = (event) => {
  const { salt, difficultyBits } = event.data;
  const started = performance.now();
  let lastReport = started;
  const found = solve(salt, difficultyBits, {
    every: 4096,
    onProgress: (tried) => {
      const now = performance.now();
      // About ten reports a second: enough for a smooth bar, cheap to post.
      if (now - lastReport >= 100) {
        lastReport = now;
        self.postMessage({ type: 'progress', tried, elapsedMs: now - started });
      }
    },
  });
  if (found) {
    self.postMessage({ type: 'solved', nonce: found.nonce, tried: found.tried, elapsedMs: performance.now() - started });
  }
};
