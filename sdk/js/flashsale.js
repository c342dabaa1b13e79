// The flash-sale SDK: the waiting room's protocol as an ES module, for the
// server's own waiting-room page and for a shop's storefront alike (served
// at /sdk/flashsale.js, no build step, no dependencies). A WaitingRoom
// holds a shopper's place (a signed ticket, kept in storage), polls the
// sale's status when the server says to (Retry-After, jittered, never
// sooner), solves the proof of work in a Web Worker (pow-worker.js, beside
// this file), trades it for an admission, reserves with an
// Idempotency-Key, and follows the hold to its end. It never touches the
// DOM and never words anything: it dispatches events (it is an
// EventTarget) that its owner shows. docs/integrate.md has an example.
//
// Every state is dispatched twice: as the event `state`, detail {view,
// ...} (what a page that shows every state listens to), and under its own
// name, detail the same:
//
//   event        view         detail
//   signin       signin       {reason}  '' | 'expired' | 'notToken' | 'savedNotToken' | 'demoFailed'
//   register     register     {closesAt: Date|null}            (a lottery: register() to enter)
//   scheduled    scheduled    {opensIn (s), position (0: not known yet), fairness}
//   position     waiting      {position, firstPosition, wait (s) | null, unitsLeft | null, chance}
//   challenge    challenge    {phase: 'starting'|'solving'|'solved'|'refused'|'polling'|'reused',
//                              share (0..1), rate (tries/s), secondsLeft, solvedIn (s)}
//   turn         admitted     {expiresIn (s), limit, admissionToken}
//   reserved     reserved     {expiresIn (s), quantity, reservationId}
//   confirmed    confirmed    {orderId}
//   soldout      sold_out     {final}
//   notselected  not_selected
//   cancelled, expired, paused, closed (same names)
//   unavailable  unavailable  {retryIn (s)}: the server is busy, the room retries by itself
//   error        error        {reason, code}: the room stopped; boot() starts again
//
// Besides: `note` {target: 'reserve'|'reserved', key, vars}, a remark
// within a state (key names a message of the page's catalogues, e.g.
// 'reserve.busy' {seconds}); `sale` (the published sale, as loaded);
// `user` (the signed-in shopper's id, '' when signed out).

import { Api, reserveAttempt, retrying, transient } from './api.js';
import { backoffDelay, newKey, pollDelay } from './timing.js';
import { expectedTries } from './pow.js';
import { afterAdmission, SpentSalts } from './challenge.js';

export { Api, reserveAttempt, retrying, transient } from './api.js';
export { backoffDelay, jitter, newKey, parseRetryAfter, pollDelay } from './timing.js';

/** Where the waiting-room page keeps the shopper's JWT (its jwtKey). */
export const JWT_KEY = 'flashsale:jwt';

/** Storage that survives a browser that refuses it (private modes). */
export const browserStorage = {
  get(k) { try { return localStorage.getItem(k); } catch { return null; } },
  set(k, v) { try { localStorage.setItem(k, v); } catch { /* kept in memory only */ } },
  del(k) { try { localStorage.removeItem(k); } catch { /* nothing to forget */ } },
};

/** claims decodes a JWT's payload (not verified: the server does that). */
export function claims(jwt) {
  try {
    const b64 = jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(b64.padEnd(Math.ceil(b64.length / 4) * 4, '=')));
  } catch {
    return null;
  }
}

/** How often a held reservation is looked at, for a payment made elsewhere. */
const HOLD_CHECK_MS = 15_000;

/** The events dispatched for a view, where the name is not the view's own. */
const EVENT_OF_VIEW = { waiting: 'position', admitted: 'turn', sold_out: 'soldout', not_selected: 'notselected' };

/** Module workers made from a blob, one per cross-origin worker script. */
const blobWorkers = new Map();

/**
 * powWorker starts the proof-of-work worker at url. A worker's script
 * must come from the page's own origin: for a storefront that loads the
 * SDK from the flash-sale server, the worker is a one-line module of the
 * page's origin (a blob) that imports the script from the server, which
 * serves it with CORS. (A page whose Content-Security-Policy refuses blob:
 * workers serves pow-worker.js itself and passes workerURL.)
 *
 * @param {string|URL} url
 * @returns {Worker}
 */
export function powWorker(url) {
  const href = new URL(url, globalThis.location && globalThis.location.href).href;
  const here = globalThis.location && globalThis.location.origin;
  if (!here || new URL(href).origin === here) return new Worker(href, { type: 'module' });
  let blob = blobWorkers.get(href);
  if (!blob) {
    blob = URL.createObjectURL(new Blob([`import ${JSON.stringify(href)};\n`], { type: 'text/javascript' }));
    blobWorkers.set(href, blob);
  }
  return new Worker(blob, { type: 'module' });
}

export class WaitingRoom extends EventTarget {
  /**
   * @param {{sku?: string, base?: string, api?: Api, jwt?: string,
   *          jwtKey?: string|null, storage?: typeof browserStorage,
   *          workerURL?: string|URL, newWorker?: () => Worker}} options
   *   sku, base    the sale and the flash-sale server's address ('' : this page's own)
   *   api          an Api instead (tests, or a fetch of one's own)
   *   jwt          the shopper's JWT, from the shop's sign-in (or pass it to boot)
   *   jwtKey       where storage keeps the JWT across reloads (null: not kept)
   *   storage      where the ticket and a hold are kept across reloads (localStorage)
   *   workerURL    the proof-of-work worker (pow-worker.js beside this module)
   */
  constructor({ sku = '', base = '', api, jwt, jwtKey = null, storage = browserStorage, workerURL, newWorker } = {}) {
    super();
    this.api = api || new Api({ sku, base });
    this.sku = this.api.sku;
    this.storage = storage;
    this.jwtKey = jwtKey;
    const worker = workerURL || new URL('./pow-worker.js', import.meta.url);
    this.newWorker = newWorker || (() => powWorker(worker));
    this.jwt = null;
    this.user = '';
    this.sale = null;
    this.ticket = null;
    this.view = 'loading';
    this.failures = 0; // transient failures in a row, for the backoff
    this.firstPosition = 0; // the place first seen, for progress
    this.admission = null; // {token}
    this.reservation = null; // {id, quantity, paymentRef?}
    this.worker = null;
    this.spentSalts = new SpentSalts(); // salts traded or refused: not solved again
    this.ticketRetried = false;
    this.timers = { poll: 0, lapse: 0, hold: 0 };
    this.api.jwt = () => this.jwt;
    if (jwt) this.signIn(jwt);
  }

  // ---- reporting ----------------------------------------------------------

  /** dispatch sends the event type with detail. */
  dispatch(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  emit(view, data = {}) {
    this.view = view;
    const detail = { view, ...data };
    this.dispatch('state', detail);
    this.dispatch(EVENT_OF_VIEW[view] || view, detail);
  }

  note(target, key, vars = {}) {
    this.dispatch('note', { target, key, vars });
  }

  onSale(sale) { this.dispatch('sale', sale); }
  onUser(user) { this.dispatch('user', user); }

  ticketKey() { return `flashsale:ticket:${this.sku}:${this.user}`; }
  reservationKey() { return `flashsale:reservation:${this.sku}:${this.user}`; }

  /** later runs fn after ms on the named timer; one pending per name. */
  later(name, fn, ms) {
    clearTimeout(this.timers[name]);
    this.timers[name] = setTimeout(fn, ms);
  }

  stop() {
    for (const name of Object.keys(this.timers)) clearTimeout(this.timers[name]);
  }

  /** close stops every timer and the proof of work: the room goes quiet. */
  close() {
    this.stop();
    this.endWorker();
  }

  /** unavailable says "come back shortly" and retries with backoff. */
  unavailable(answer, retry) {
    this.failures++;
    const ms = backoffDelay(this.failures, answer.retryAfter);
    this.emit('unavailable', { retryIn: Math.ceil(ms / 1000) });
    this.later('poll', retry, ms);
  }

  fail(reason, code = '') {
    this.stop();
    this.emit('error', { reason, code });
  }

  // ---- the sale and the shopper --------------------------------------------

  /**
   * boot loads the sale, then takes or resumes the shopper's place:
   * signed in with jwt if given, else as before (the constructor's jwt,
   * or the one kept at jwtKey). Without one it dispatches signin.
   */
  async boot(jwt) {
    this.stop();
    this.emit('loading');
    if (!this.sku) return this.fail('noSku');
    if (jwt) this.jwt = null; // a new sign-in replaces the old
    if (!(await this.loadSale())) return undefined;
    if (!this.jwt) {
      const given = jwt || (this.jwtKey ? this.storage.get(this.jwtKey) : null);
      if (!given || !this.signIn(given)) return this.showSignIn(given ? 'savedNotToken' : '');
    }
    return this.start();
  }

  async loadSale() {
    const a = await this.api.sale();
    if (a.ok) {
      this.failures = 0;
      this.sale = a.body;
      this.onSale(a.body);
      return true;
    }
    if (a.status === 404) this.fail('noSale', a.code);
    else if (transient(a)) this.unavailable(a, () => this.boot());
    else this.fail('generic', a.code);
    return false;
  }

  /** signIn takes a shopper JWT (from the shop's sign-in); false if it is none. */
  signIn(jwt) {
    const c = claims(jwt);
    if (!c || typeof c.sub !== 'string' || !c.sub) return false;
    this.jwt = jwt;
    this.user = c.sub;
    if (this.jwtKey) this.storage.set(this.jwtKey, jwt);
    this.onUser(c.sub);
    return true;
  }

  signOut(reason = '') {
    this.stop();
    if (this.jwtKey) this.storage.del(this.jwtKey);
    this.jwt = null;
    this.user = '';
    this.ticket = null;
    this.onUser('');
    this.showSignIn(reason);
  }

  showSignIn(reason) {
    this.emit('signin', { reason });
  }

  /** signInWith takes a pasted token; it says whether it was one. */
  signInWith(jwt) {
    const token = String(jwt || '').trim().replace(/^Bearer\s+/i, '');
    if (!this.signIn(token)) {
      this.emit('signin', { reason: 'notToken' });
      return false;
    }
    this.start();
    return true;
  }

  /** signInDemo asks a --demo server for a demo shopper's JWT. */
  async signInDemo(name) {
    const a = await this.api.demoToken(String(name || '').trim());
    if (a.ok && this.signIn(a.body.token)) return this.start();
    return this.emit('signin', { reason: 'demoFailed' });
  }

  // ---- the place in line ---------------------------------------------------

  async start() {
    this.stop();
    this.ticketRetried = false;
    // A hold taken before a reload comes first: it is what the shopper is
    // about to lose.
    const saved = this.storage.get(this.reservationKey());
    if (saved) {
      try {
        this.reservation = JSON.parse(saved);
        return this.checkReservation();
      } catch {
        this.storage.del(this.reservationKey());
      }
    }
    this.ticket = this.storage.get(this.ticketKey());
    return this.ticket ? this.poll() : this.takeTicket();
  }

  async takeTicket() {
    const a = await this.api.ticket();
    if (a.ok) {
      this.failures = 0;
      this.ticket = a.body.token;
      this.storage.set(this.ticketKey(), this.ticket);
      return this.poll();
    }
    switch (a.code) {
      case 'unauthenticated':
        return this.signOut('expired');
      case 'not_registered':
        return this.emit('register', { closesAt: this.registrationCloses() });
      case 'sold_out':
        return this.soldOut(true);
      case 'closed':
        this.stop();
        return this.emit('closed');
      case 'not_eligible':
        return this.fail('notEligible', a.code);
    }
    if (transient(a) || a.status === 429) return this.unavailable(a, () => this.takeTicket());
    return this.fail('generic', a.code);
  }

  registrationCloses() {
    const at = this.sale && Date.parse(this.sale.registrationClosesAt);
    return at ? new Date(at) : null;
  }

  /** register enters a lottery's draw, then takes the place. */
  async register() {
    const a = await retrying(() => this.api.register());
    if (a.ok || a.code === 'registration_closed') {
      // Registered (or too late, which the ticket then says).
      return this.takeTicket();
    }
    if (a.code === 'unauthenticated') return this.signOut('expired');
    return this.fail('generic', a.code);
  }

  /** poll asks the sale's status with the ticket and reports the answer. */
  async poll() {
    clearTimeout(this.timers.poll);
    const a = await this.api.status(this.ticket);
    if (!a.ok) {
      if (a.code === 'invalid_token' && !this.ticketRetried) {
        // A ticket from another sale of this SKU, or keys that rotated:
        // take a new one, once.
        this.ticketRetried = true;
        this.storage.del(this.ticketKey());
        return this.takeTicket();
      }
      if (a.code === 'not_eligible') return this.fail('notEligible', a.code);
      if (transient(a) || a.status === 429) return this.unavailable(a, () => this.poll());
      return this.fail('generic', a.code);
    }
    this.failures = 0;
    const s = a.body;
    if (s.token) {
      // The draw has placed this ticket: the new one carries the place.
      this.ticket = s.token;
      this.storage.set(this.ticketKey(), s.token);
    }
    const previous = this.view;
    const again = () => this.later('poll', () => this.poll(), pollDelay(a.retryAfter));
    switch (s.state) {
      case 'scheduled': {
        let opensIn = s.opensInSeconds;
        if (typeof opensIn !== 'number') opensIn = (Date.parse(s.opensAt) - Date.now()) / 1000; // an older server
        this.emit('scheduled', { opensIn, position: s.position || 0, fairness: this.sale && this.sale.policy && this.sale.policy.fairness });
        again();
        break;
      }
      case 'waiting': {
        const position = s.position || 0;
        if (!this.firstPosition || position > this.firstPosition) this.firstPosition = position;
        this.emit('waiting', {
          position,
          firstPosition: this.firstPosition,
          wait: typeof s.estimatedWaitSeconds === 'number' ? s.estimatedWaitSeconds : null,
          unitsLeft: typeof s.unitsLeft === 'number' ? s.unitsLeft : null,
          chance: s.chance || '',
        });
        again();
        break;
      }
      case 'admitted':
        this.admitted(s.admissionToken, s.expiresIn);
        break;
      case 'challenge':
        if (s.challenge && this.spentSalts.has(s.challenge.salt)) {
          // The room hands out a salt for up to a minute, spent or not:
          // solving it again would only fail, and failures count against
          // the shopper. Wait for a fresh one.
          this.endWorker();
          this.emit('challenge', { phase: 'reused', share: 0 });
          again();
        } else {
          this.solve(s.challenge);
        }
        break;
      case 'sold_out':
        this.soldOut(!!s.final);
        if (!s.final) again();
        break;
      case 'paused':
        this.emit('paused');
        again();
        break;
      case 'not_selected':
        this.emit('not_selected');
        break;
      case 'closed':
        this.emit('closed');
        break;
      default:
        return this.fail('unknownState', String(s.state));
    }
    if (previous !== this.view) {
      // Something changed (the draw ran, the sale opened): refresh what
      // the sale says, e.g. the link to the published draw.
      this.api.sale().then((r) => {
        if (r.ok) {
          this.sale = r.body;
          this.onSale(r.body);
        }
      });
    }
    return undefined;
  }

  soldOut(final) {
    if (final) this.stop();
    this.emit('sold_out', { final });
  }

  // ---- the proof of work ---------------------------------------------------

  endWorker() {
    if (this.worker) this.worker.terminate();
    this.worker = null;
  }

  /**
   * solve runs the proof of work in a worker, then trades the solution
   * for an admission (POST /sale/{sku}/admission). A challenge that
   * expires first is dropped and the status asked again.
   */
  solve(ch) {
    if (!ch || ch.algorithm !== 'sha256') return this.fail('pow', ch && ch.algorithm);
    this.endWorker();
    const expected = expectedTries(ch.difficultyBits);
    const worker = this.newWorker();
    this.worker = worker;
    this.emit('challenge', { phase: 'starting', share: 0 });
    const giveUp = setTimeout(() => {
      this.endWorker();
      this.poll(); // a fresh challenge
    }, (ch.expiresIn || 60) * 1000);
    worker.onmessage = async (e) => {
      const m = e.data;
      if (m.type === 'progress') {
        // The search has no fixed length: the share of the expected
        // tries done, capped below 1 until it is actually solved.
        const rate = (m.tried / Math.max(1, m.elapsedMs)) * 1000;
        this.emit('challenge', {
          phase: 'solving',
          share: Math.min(0.95, m.tried / expected),
          rate,
          secondsLeft: Math.max(0, (expected - m.tried) / Math.max(rate, 1)),
        });
        return undefined;
      }
      if (m.type !== 'solved') return undefined;
      clearTimeout(giveUp);
      this.endWorker();
      this.emit('challenge', { phase: 'solved', share: 1, solvedIn: m.elapsedMs / 1000 });
      const a = await retrying(() => this.api.admission(this.ticket, ch.salt, m.nonce));
      const pollSoon = () => this.later('poll', () => this.poll(), pollDelay(a.retryAfter));
      switch (afterAdmission(a)) {
        case 'admitted':
          this.spentSalts.add(ch.salt);
          return this.admitted(a.body.admissionToken, a.body.expiresIn);
        case 'fresh_salt':
          this.spentSalts.add(ch.salt);
          this.emit('challenge', { phase: 'refused', share: 0 });
          return pollSoon();
        case 'paused':
          this.emit('paused');
          return pollSoon();
        case 'sold_out':
          this.soldOut(false); // the next poll says whether it is final
          return pollSoon();
        case 'closed':
          this.stop();
          return this.emit('closed');
        case 'not_selected':
          this.stop();
          return this.emit('not_selected');
        case 'poll':
          this.emit('challenge', { phase: 'polling', share: 0 });
          return pollSoon();
        case 'sign_in':
          return this.signOut('expired');
        case 'unavailable':
          return this.unavailable(a, () => this.poll());
      }
      return this.fail('generic', a.code);
    };
    worker.onerror = () => {
      clearTimeout(giveUp);
      this.fail('worker');
    };
    worker.postMessage({ salt: ch.salt, difficultyBits: ch.difficultyBits });
    return undefined;
  }

  // ---- the turn and the hold -----------------------------------------------

  admitted(token, expiresIn) {
    this.stop();
    this.admission = { token };
    const limit = (this.sale && this.sale.policy && this.sale.policy.perUserLimit) || 1;
    // The token goes with the turn, for a storefront whose own server
    // reserves (docs/integrate.md); reserve() here uses it too.
    this.emit('admitted', { expiresIn: expiresIn || 0, limit, admissionToken: token });
    // An admission that runs out unused: ask again (the place is kept),
    // after the usual delay, so that an admission answered with
    // expiresIn 0 cannot turn into a loop.
    this.later('lapse', () => {
      if (this.view !== 'admitted') return;
      this.admission = null;
      this.later('poll', () => this.poll(), pollDelay(0));
    }, (expiresIn || 0) * 1000);
  }

  /**
   * reserve makes one attempt to reserve quantity units with the turn.
   * It resolves to the answer (ok, status, code, body: {reservationId,
   * expiresAt, quantity} when ok), null without a turn; the events say
   * what follows (reserved, or the state the answer leads to).
   */
  async reserve(quantity = 1) {
    if (!this.admission) return null;
    this.note('reserve', 'reserve.reserving');
    // One call is one attempt: a fresh Idempotency-Key, repeated as it is
    // on each retry of a lost or busy answer, so no retry can buy twice.
    const a = await reserveAttempt(this.api, { admissionToken: this.admission.token, quantity, newKey }, {
      onRetry: (_, ms) => this.note('reserve', 'reserve.busy', { seconds: Math.ceil(ms / 1000) }),
    });
    await this.reserved(a, quantity);
    return { ok: a.ok, status: a.status, code: a.code, message: a.message, body: a.body, key: a.key };
  }

  /** reserved follows a reserve's answer: the hold, or what the code says. */
  async reserved(a, quantity) {
    if (a.ok) {
      this.admission = null;
      clearTimeout(this.timers.lapse);
      this.reservation = { id: a.body.reservationId, quantity: a.body.quantity || quantity };
      this.saveReservation();
      // Count down at once from the sale's hold time (at most a round
      // trip generous), then from the server's own figure: the reserve
      // answer carries only expiresAt, on the server's clock.
      const hold = (this.sale && this.sale.policy && this.sale.policy.holdSeconds) || holdSeconds(a.body);
      this.held(hold);
      return this.refineHold(this.reservation);
    }
    switch (a.code) {
      case 'sold_out':
        this.admission = null;
        return this.poll(); // sold out, final or not: the status says which
      case 'limit_reached':
        return this.fail('limitReached', a.code);
      case 'admission_expired':
      case 'admission_invalid':
      case 'admission_required':
      case 'not_open':
        this.admission = null;
        return this.poll(); // a fresh admission, the place kept
      case 'admission_used':
        // One turn per place: a reservation spends the admission, and a
        // hold that expired or was released does not give the turn back.
        return this.fail('admissionUsed', a.code);
      case 'sale_paused':
        this.admission = null;
        this.emit('paused');
        return this.later('poll', () => this.poll(), pollDelay(a.retryAfter));
      case 'unauthenticated':
        return this.signOut('expired');
      case 'not_eligible':
        return this.fail('notEligible', a.code);
      case 'rate_limited': {
        const ms = pollDelay(a.retryAfter);
        this.note('reserve', 'reserve.tooMany', { seconds: Math.ceil(ms / 1000), retryIn: ms });
        return undefined;
      }
    }
    // Still busy after the retries: the shopper may try again (a new
    // attempt) while the turn lasts.
    this.note('reserve', 'reserve.noAnswer', { again: true });
    return undefined;
  }

  saveReservation() {
    const r = this.reservation;
    this.storage.set(this.reservationKey(), JSON.stringify({ id: r.id, quantity: r.quantity }));
  }

  held(seconds) {
    this.stop();
    const r = this.reservation;
    this.emit('reserved', { expiresIn: seconds, quantity: r.quantity, reservationId: r.id });
    // When the hold's time is up, ask what became of it; meanwhile look
    // now and then, for a payment made at the shop's checkout.
    this.later('hold', () => this.checkReservation(), Math.max(0, seconds) * 1000 + 500);
    this.later('poll', () => this.refineHold(r), HOLD_CHECK_MS);
  }

  /** refineHold follows the hold: its countdown from the server, or its end. */
  async refineHold(r) {
    const a = await this.api.reservation(r.id);
    if (this.reservation !== r || this.view !== 'reserved') return undefined;
    if (a.ok && a.body.state === 'pending' && typeof a.body.expiresIn === 'number') {
      this.held(a.body.expiresIn);
      return undefined;
    }
    if (a.ok) return this.checkReservation();
    this.later('poll', () => this.refineHold(r), HOLD_CHECK_MS);
    return undefined;
  }

  /** checkReservation asks what became of a hold (after a reload, or when its time is up). */
  async checkReservation() {
    const r = this.reservation;
    if (!r) return this.start();
    const a = await retrying(() => this.api.reservation(r.id));
    if (!a.ok) {
      if (a.code === 'unauthenticated') return this.signOut('expired');
      if (a.status === 404) return this.forgetReservation(true);
      if (transient(a)) return this.unavailable(a, () => this.checkReservation());
      return this.fail('generic', a.code);
    }
    const res = a.body;
    switch (res.state) {
      case 'pending': {
        const left = holdSeconds(res);
        if (left <= 0) {
          // Past its expiry by the server's clock: it can no longer be
          // paid, and the sweeper puts the unit back on sale.
          this.forgetReservation(false);
          return this.emit('expired');
        }
        r.quantity = res.quantity;
        return this.held(left);
      }
      case 'confirmed':
        return this.confirmed(res.orderId);
      case 'expired':
        this.forgetReservation(false);
        return this.emit('expired');
      case 'cancelled':
        this.forgetReservation(false);
        return this.emit('cancelled');
    }
    return this.fail('unknownState', String(res.state));
  }

  forgetReservation(thenStart) {
    this.storage.del(this.reservationKey());
    this.reservation = null;
    if (thenStart) this.start();
  }

  confirmed(orderId) {
    this.stop();
    this.emit('confirmed', { orderId });
  }

  /**
   * pay confirms the hold with a made-up payment reference: the demo's
   * payment. A shop confirms from its own checkout, after payment.
   */
  async pay() {
    const r = this.reservation;
    if (!r) return undefined;
    this.note('reserved', 'pay.paying');
    // Confirming again returns the same order, so retries are safe.
    const ref = r.paymentRef || (r.paymentRef = `demo-pay-${newKey().slice(0, 12)}`);
    const a = await retrying(() => this.api.confirm(r.id, ref), {
      onRetry: (_, ms) => this.note('reserved', 'pay.busy', { seconds: Math.ceil(ms / 1000) }),
    });
    if (a.ok) {
      this.saveReservation();
      return this.confirmed(a.body.orderId);
    }
    if (a.code === 'reservation_expired') { this.forgetReservation(false); return this.emit('expired'); }
    if (a.code === 'reservation_cancelled') { this.forgetReservation(false); return this.emit('cancelled'); }
    if (a.code === 'unauthenticated') return this.signOut('expired');
    this.note('reserved', 'pay.failed', { again: true });
    return undefined;
  }

  /** release gives the hold back: its units go to the next in line. */
  async release() {
    const r = this.reservation;
    if (!r) return undefined;
    const a = await retrying(() => this.api.cancel(r.id));
    if (a.ok) { this.forgetReservation(false); this.stop(); return this.emit('cancelled'); }
    if (a.code === 'reservation_expired') { this.forgetReservation(false); this.stop(); return this.emit('expired'); }
    this.note('reserved', 'release.failed');
    return undefined;
  }
}

/**
 * holdSeconds is how long a reservation has left: expiresIn when the
 * server gives it, else expiresAt against this device's clock.
 */
export function holdSeconds(body) {
  if (typeof body.expiresIn === 'number') return body.expiresIn;
  return Math.max(0, (Date.parse(body.expiresAt) - Date.now()) / 1000);
}
