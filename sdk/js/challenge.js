// The proof-of-work step's decisions, apart from the page so that they are
// unit-tested: what an answer to POST /sale/{sku}/admission means, and
// which salts are not worth solving again.

import { transient } from './api.js';

/**
 * afterAdmission says what the page does with the answer to its solution
 * (after retrying the transient ones):
 *
 *   admitted      the admission is in a.body (admissionToken, expiresIn)
 *   fresh_salt    challenge_failed: that salt was wrong, expired or spent;
 *                 poll, after the usual delay, for another
 *   paused        the sale paused while the shopper solved: say so, poll
 *   sold_out      nothing left for now: say so, poll (the status says
 *                 whether it is final)
 *   closed, not_selected   final: say so, stop
 *   poll          the place is not (or no longer) up, or the ticket is not
 *                 valid: poll after the usual delay, and show what the
 *                 status says
 *   sign_in       the sign-in has expired
 *   unavailable   still no answer: come back shortly
 *   fail          an answer this page does not know
 *
 * None of them sends the same salt again, and none polls at once: a page
 * that polled and solved in a loop would be held as automation.
 *
 * @param {import('./api.js').Answer} a
 * @returns {string}
 */
export function afterAdmission(a) {
  if (a.ok) return 'admitted';
  switch (a.code) {
    case 'challenge_failed':
      return 'fresh_salt';
    case 'sale_paused':
      return 'paused';
    case 'sold_out':
      return 'sold_out';
    case 'closed':
      return 'closed';
    case 'not_selected':
      return 'not_selected';
    case 'not_admitted':
    case 'invalid_token':
    case 'rate_limited':
      return 'poll';
    case 'unauthenticated':
      return 'sign_in';
  }
  if (transient(a)) return 'unavailable';
  return 'fail';
}

/**
 * SpentSalts remembers the salts this page has traded for an admission or
 * had refused (challenge_failed): the waiting room hands out the same salt
 * for a while (up to a minute), and one that was spent, expired or refused
 * fails again, each failure counting against the shopper. The page waits
 * for a fresh one instead. (A salt sent while the sale paused, sold out or
 * closed was not checked, so not spent: it may be sent again.)
 */
export class SpentSalts {
  constructor(capacity = 16) {
    this.capacity = capacity;
    this.salts = [];
  }

  add(salt) {
    if (!salt || this.has(salt)) return;
    this.salts.push(salt);
    if (this.salts.length > this.capacity) this.salts.shift();
  }

  has(salt) {
    return this.salts.includes(salt);
  }
}
