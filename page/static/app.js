// The waiting room's page. It holds the shopper's place (a signed ticket,
// kept in localStorage), polls the sale's status when the server says to,
// jittered, and walks the shopper through the funnel: countdown, place in
// line, proof of work, reserve, the hold's countdown, payment (simulated),
// and every way a sale can say no.
//
// Everything it shows comes from the JSON routes of the contract; the page
// itself is static and the same for everyone, so an edge or a CDN serves it.

import { Api, reserveAttempt, retrying, transient } from './api.js';
import { backoffDelay, clock, newKey, pollDelay, roughly } from './timing.js';
import { expectedTries } from './pow.js';
import { afterAdmission, SpentSalts } from './challenge.js';

const $ = (id) => document.getElementById(id);

// ---- where we are -------------------------------------------------------

const sku = decodeURIComponent(location.pathname.split('/')[2] || '');

/** Storage that survives a browser that refuses it (private modes). */
const store = {
  get(k) { try { return localStorage.getItem(k); } catch { return null; } },
  set(k, v) { try { localStorage.setItem(k, v); } catch { /* kept in memory only */ } },
  del(k) { try { localStorage.removeItem(k); } catch { /* nothing to forget */ } },
};

const JWT_KEY = 'flashsale:jwt';
const ticketKey = () => `flashsale:ticket:${sku}:${state.user}`;
const reservationKey = () => `flashsale:reservation:${sku}:${state.user}`;

const state = {
  jwt: null, // the shopper's JWT
  user: '', // its sub
  sale: null, // GET /sale/{sku}
  ticket: null, // the waiting-room token
  view: 'loading',
  failures: 0, // transient failures in a row, for the backoff
  pollTimer: 0,
  firstPosition: 0, // the place first seen, for the progress bar
  admission: null, // {token, deadline}
  reservation: null, // {id, quantity, deadline}
  deadlines: {}, // countdown element id -> performance.now() deadline
  worker: null, // the proof-of-work worker, while one runs
  spentSalts: new SpentSalts(), // salts traded or refused: not solved again
  ticketRetried: false,
};

const api = new Api({ sku, jwt: () => state.jwt });

// ---- views and countdowns -----------------------------------------------

/** show makes one view visible; body[data-view] tells tests and CSS which. */
function show(view) {
  state.view = view;
  document.body.dataset.view = view;
  for (const el of document.querySelectorAll('section.view')) {
    el.hidden = el.dataset.view !== view;
  }
}

/**
 * countdown makes the element count down to `seconds` from now. The page
 * counts from answers' relative times (opensInSeconds, expiresIn) rather
 * than from absolute ones against the phone's clock, which may be wrong by
 * minutes.
 */
function countdown(id, seconds) {
  state.deadlines[id] = performance.now() + seconds * 1000;
  tick();
}

function remaining(id) {
  const d = state.deadlines[id];
  return d === undefined ? 0 : Math.max(0, (d - performance.now()) / 1000);
}

function tick() {
  for (const id of Object.keys(state.deadlines)) {
    const el = $(id);
    if (el) el.textContent = clock(remaining(id));
  }
  if (state.view === 'admitted' && state.admission && remaining('admission-countdown') <= 0) {
    // The admission ran out unused: ask again (the place is kept), after
    // the usual delay, so that an admission answered with expiresIn 0
    // cannot turn into a loop.
    state.admission = null;
    later(poll, pollDelay(0));
  }
  if (state.view === 'reserved' && state.reservation && remaining('hold-countdown') <= 0 && !state.reservation.checking) {
    state.reservation.checking = true;
    checkReservation();
  }
}
setInterval(tick, 250);

/** later runs the next poll after ms; there is only ever one pending. */
function later(fn, ms) {
  clearTimeout(state.pollTimer);
  state.pollTimer = setTimeout(fn, ms);
}

function stopPolling() {
  clearTimeout(state.pollTimer);
}

function note(id, text) {
  $(id).textContent = text || '';
}

/** unavailable shows "come back shortly" and retries with backoff. */
function unavailable(answer, retry) {
  state.failures++;
  const ms = backoffDelay(state.failures, answer.retryAfter);
  show('unavailable');
  note('unavailable-when', `in about ${Math.ceil(ms / 1000)} seconds`);
  later(retry, ms);
}

function fail(message) {
  stopPolling();
  show('error');
  note('error-text', message || 'The shop gave an answer this page does not understand.');
}

// ---- the sale ------------------------------------------------------------

const FAIRNESS = {
  fifo: 'First come, first served: places follow the order of arrival.',
  random: 'Random: everyone who takes a place before the open is shuffled at the open; later arrivals queue behind them in order of arrival.',
  lottery: 'Lottery: register before registration closes; winners are drawn then and admitted in drawn order.',
};

function renderSale(s) {
  state.sale = s;
  $('sale-name').textContent = s.name || s.sku;
  document.title = `${s.name || s.sku} — waiting room`;
  const opens = new Date(s.opensAt);
  const when = Number.isNaN(opens.getTime()) ? '' : opens.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
  $('sale-when').textContent = s.state === 'scheduled' ? `Opens ${when} (your time)` : `Opened ${when}`;
  const p = s.policy || {};
  let fairness = FAIRNESS[p.fairness] || p.fairness;
  if (p.fairness === 'lottery') {
    const closes = new Date(s.registrationClosesAt);
    if (!Number.isNaN(closes.getTime())) {
      fairness += ` Registration closes ${closes.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' })}.`;
    }
    if (typeof p.lotteryWinners === 'number') fairness += ` Up to ${p.lotteryWinners} winners are drawn.`;
  }
  $('policy-fairness').textContent = fairness;
  $('policy-limit').textContent = `Up to ${p.perUserLimit} per shopper.`;
  $('policy-hold').textContent = `A reservation is held ${roughHold(p.holdSeconds)} for payment; unpaid, it goes back on sale.`;
  $('policy-age-row').hidden = !(p.minAccountAgeSeconds > 0);
  if (p.minAccountAgeSeconds > 0) {
    $('policy-age').textContent = `Open to accounts older than ${roughAge(p.minAccountAgeSeconds)}.`;
  }
  $('policy-challenge-row').hidden = !p.challenge;
  $('policy-seed-row').hidden = !s.seedCommitment;
  if (s.seedCommitment) {
    $('policy-seed').textContent = s.seedCommitment;
    const drawURL = api.saleURL('/draw');
    $('policy-draw-link').hidden = !s.drawn;
    $('policy-draw-link').href = drawURL;
    $('policy-draw-pending').hidden = !!s.drawn;
    $('notselected-draw').hidden = !s.drawn;
    $('notselected-draw').href = drawURL;
  }
}

function roughHold(seconds) {
  if (seconds < 120) return `${seconds} seconds`;
  return `${Math.round(seconds / 60)} minutes`;
}

function roughAge(seconds) {
  const days = seconds / 86400;
  return days >= 1 ? `${Math.round(days)} day${Math.round(days) === 1 ? '' : 's'}` : `${Math.round(seconds / 3600)} hours`;
}

async function loadSale() {
  const a = await api.sale();
  if (a.ok) {
    state.failures = 0;
    renderSale(a.body);
    return true;
  }
  if (a.status === 404) {
    fail('There is no sale here. Check the address you were given.');
  } else if (transient(a)) {
    unavailable(a, boot);
  } else {
    fail(a.message);
  }
  return false;
}

// ---- signing in ----------------------------------------------------------

/** claims decodes a JWT's payload (not verified: the server does that). */
function claims(jwt) {
  try {
    const b64 = jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(b64.padEnd(Math.ceil(b64.length / 4) * 4, '=')));
  } catch {
    return null;
  }
}

function signIn(jwt) {
  const c = claims(jwt);
  if (!c || typeof c.sub !== 'string' || !c.sub) return false;
  state.jwt = jwt;
  state.user = c.sub;
  store.set(JWT_KEY, jwt);
  $('who').hidden = false;
  $('who-name').textContent = c.sub;
  return true;
}

function signOut(reason) {
  stopPolling();
  store.del(JWT_KEY);
  state.jwt = null;
  state.user = '';
  state.ticket = null;
  $('who').hidden = true;
  showSignIn(reason);
}

/** The JWT comes from the address's fragment (#jwt=…), else from storage. */
function initialJwt() {
  const m = /(?:^|[#&])jwt=([^&]+)/.exec(location.hash);
  if (m) {
    // Keep the token out of the address bar (and out of screenshots and
    // shared links) once it is stored.
    history.replaceState(null, '', location.pathname + location.search);
    return decodeURIComponent(m[1]);
  }
  return store.get(JWT_KEY);
}

async function showSignIn(reason) {
  show('signin');
  $('signin-reason').hidden = !reason;
  note('signin-reason', reason);
  if (!$('demo-name').value) $('demo-name').value = `shopper-${newKey().slice(0, 4)}`;
  // Offer the demo sign-in only where the server answers it: --demo with
  // the development key. Probing with no user costs a 400, not a token.
  const probe = await api.demoToken('');
  $('demo-signin').hidden = probe.status === 404 || probe.status === 0 || probe.status === 405;
}

$('demo-go').addEventListener('click', async () => {
  const a = await api.demoToken($('demo-name').value.trim());
  if (a.ok && signIn(a.body.token)) return start();
  note('signin-reason', a.message || 'The demo sign-in did not answer.');
  $('signin-reason').hidden = false;
});

$('jwt-go').addEventListener('click', () => {
  const jwt = $('jwt-input').value.trim().replace(/^Bearer\s+/i, '');
  if (signIn(jwt)) return start();
  note('signin-reason', 'That does not look like a shopper token (a JWT with a sub claim).');
  $('signin-reason').hidden = false;
});

$('sign-out').addEventListener('click', () => signOut());

// ---- the place in line ---------------------------------------------------

async function start() {
  stopPolling();
  state.ticketRetried = false;
  // A hold taken before a reload comes first: it is what the shopper is
  // about to lose.
  const saved = store.get(reservationKey());
  if (saved) {
    try {
      state.reservation = JSON.parse(saved);
      return checkReservation();
    } catch {
      store.del(reservationKey());
    }
  }
  state.ticket = store.get(ticketKey());
  return state.ticket ? poll() : takeTicket();
}

async function takeTicket() {
  const a = await api.ticket();
  if (a.ok) {
    state.failures = 0;
    state.ticket = a.body.token;
    store.set(ticketKey(), state.ticket);
    return poll();
  }
  switch (a.code) {
    case 'unauthenticated':
      return signOut('Your sign-in has expired or is not valid here. Please sign in again.');
    case 'not_registered':
      return showRegister();
    case 'sold_out':
      return soldOut(true);
    case 'closed':
      stopPolling();
      return show('closed');
    case 'not_eligible':
      return fail(a.message || 'Your account cannot take part in this sale.');
  }
  if (transient(a) || a.status === 429) return unavailable(a, takeTicket);
  return fail(a.message);
}

function showRegister() {
  show('register');
  const closes = state.sale && Date.parse(state.sale.registrationClosesAt);
  note('register-countdown', Number.isNaN(closes) || !closes ? '' : `Registration closes ${new Date(closes).toLocaleTimeString()}`);
}

$('register-go').addEventListener('click', async () => {
  $('register-go').disabled = true;
  const a = await retrying(() => api.register());
  $('register-go').disabled = false;
  if (a.ok || a.code === 'registration_closed') {
    // Registered (or too late, which the ticket then says): take the place.
    return takeTicket();
  }
  if (a.code === 'unauthenticated') return signOut('Your sign-in has expired. Please sign in again.');
  return fail(a.message);
});

/** poll asks the sale's status with the ticket and shows the answer. */
async function poll() {
  stopPolling();
  const a = await api.status(state.ticket);
  if (!a.ok) {
    if (a.code === 'invalid_token' && !state.ticketRetried) {
      // A ticket from another sale of this SKU, or keys that rotated:
      // take a new one, once.
      state.ticketRetried = true;
      store.del(ticketKey());
      return takeTicket();
    }
    if (a.code === 'not_eligible') return fail(a.message);
    if (transient(a) || a.status === 429) return unavailable(a, poll);
    return fail(a.message);
  }
  state.failures = 0;
  const s = a.body;
  if (s.token) {
    // The draw has placed this ticket: the new one carries the place.
    state.ticket = s.token;
    store.set(ticketKey(), s.token);
  }
  const previous = state.view;
  const again = () => later(poll, pollDelay(a.retryAfter));
  switch (s.state) {
    case 'scheduled':
      showScheduled(s);
      again();
      break;
    case 'waiting':
      showWaiting(s);
      again();
      break;
    case 'admitted':
      showAdmitted(s.admissionToken, s.expiresIn);
      break;
    case 'challenge':
      if (s.challenge && state.spentSalts.has(s.challenge.salt)) {
        // The room hands out a salt for up to a minute, spent or not:
        // solving it again would only fail, and failures count against
        // the shopper. Wait for a fresh one.
        waitForFreshSalt();
        again();
      } else {
        solveChallenge(s.challenge);
      }
      break;
    case 'sold_out':
      soldOut(!!s.final);
      if (!s.final) again();
      break;
    case 'paused':
      show('paused');
      again();
      break;
    case 'not_selected':
      show('not_selected');
      break;
    case 'closed':
      show('closed');
      break;
    default:
      return fail(`The shop answered a state this page does not know (${s.state}).`);
  }
  if (previous !== state.view) {
    // Something changed (the draw ran, the sale opened): refresh what the
    // sale panel says, e.g. the link to the published draw.
    api.sale().then((r) => r.ok && renderSale(r.body));
  }
}

function showScheduled(s) {
  show('scheduled');
  let secs = s.opensInSeconds;
  if (typeof secs !== 'number') secs = (Date.parse(s.opensAt) - Date.now()) / 1000; // an older server
  countdown('open-countdown', secs);
  const f = state.sale && state.sale.policy && state.sale.policy.fairness;
  note('scheduled-note', {
    fifo: 'Places are in order of arrival, and yours is kept.',
    random: 'Everyone here before the open is shuffled at the open, so arriving early gives no advantage. Your place is drawn then.',
    lottery: 'You are registered for the draw. Winners are drawn when registration closes.',
  }[f] || '');
}

const CHANCE = {
  likely: 'Good: there are more units left than people ahead of you.',
  possible: 'Possible: it depends on how many ahead of you buy, and on holds that may come back.',
  unlikely: 'Unlikely: far more people are ahead of you than units are left. You may keep your place: unpaid holds come back.',
};

function showWaiting(s) {
  show('waiting');
  const pos = s.position || 0;
  if (!state.firstPosition || pos > state.firstPosition) state.firstPosition = pos;
  $('position').textContent = pos.toLocaleString();
  const done = state.firstPosition > 1 ? (state.firstPosition - pos) / (state.firstPosition - 1) : 0;
  $('progress').style.width = `${Math.round(Math.min(1, Math.max(0.03, done)) * 100)}%`;
  $('wait').textContent = typeof s.estimatedWaitSeconds === 'number' ? roughly(s.estimatedWaitSeconds) : '–';
  $('units-left').textContent = typeof s.unitsLeft === 'number' ? s.unitsLeft.toLocaleString() : '–';
  $('chance').textContent = s.chance || '–';
  note('chance-note', CHANCE[s.chance] || '');
}

function soldOut(final) {
  show('sold_out');
  $('soldout-pending').hidden = final;
  $('soldout-final').hidden = !final;
  if (final) stopPolling();
}

// ---- the proof of work ---------------------------------------------------

/**
 * solveChallenge runs the proof of work in a worker, then trades the
 * solution for an admission (POST /sale/{sku}/admission). A challenge
 * that expires first is dropped and the status asked again.
 */
function solveChallenge(ch) {
  show('challenge');
  if (!ch || ch.algorithm !== 'sha256') {
    return fail(`This page cannot solve the shop's check (${ch && ch.algorithm}).`);
  }
  if (state.worker) state.worker.terminate();
  const expected = expectedTries(ch.difficultyBits);
  const expires = performance.now() + (ch.expiresIn || 60) * 1000;
  const worker = new Worker('/assets/pow-worker.js', { type: 'module' });
  state.worker = worker;
  $('pow-progress').style.width = '0%';
  note('pow-status', 'Starting…');
  const giveUp = setTimeout(() => {
    worker.terminate();
    state.worker = null;
    poll(); // a fresh challenge
  }, Math.max(0, expires - performance.now()));
  worker.onmessage = async (e) => {
    const m = e.data;
    if (m.type === 'progress') {
      // The search has no fixed length: show the share of the expected
      // tries done, capped below 100% until it is actually solved.
      const share = Math.min(0.95, m.tried / expected);
      $('pow-progress').style.width = `${Math.round(share * 100)}%`;
      const rate = m.tried / Math.max(1, m.elapsedMs) * 1000;
      const left = Math.max(0, (expected - m.tried) / Math.max(rate, 1));
      note('pow-status', `${Math.round(rate).toLocaleString()} tries a second; about ${Math.ceil(left)} s to go`);
      return;
    }
    if (m.type !== 'solved') return;
    clearTimeout(giveUp);
    worker.terminate();
    state.worker = null;
    $('pow-progress').style.width = '100%';
    note('pow-status', `Solved in ${(m.elapsedMs / 1000).toFixed(1)} s. Checking…`);
    const a = await retrying(() => api.admission(state.ticket, ch.salt, m.nonce));
    const pollSoon = () => later(poll, pollDelay(a.retryAfter));
    switch (afterAdmission(a)) {
      case 'admitted':
        state.spentSalts.add(ch.salt);
        return showAdmitted(a.body.admissionToken, a.body.expiresIn);
      case 'fresh_salt':
        state.spentSalts.add(ch.salt);
        note('pow-status', 'The shop did not take that one (it had run out or been used). Asking for a fresh puzzle…');
        return pollSoon();
      case 'paused':
        show('paused');
        return pollSoon();
      case 'sold_out':
        soldOut(false); // the next poll says whether it is final
        return pollSoon();
      case 'closed':
        stopPolling();
        return show('closed');
      case 'not_selected':
        stopPolling();
        return show('not_selected');
      case 'poll':
        note('pow-status', 'Checking your place again…');
        return pollSoon();
      case 'sign_in':
        return signOut('Your sign-in has expired. Please sign in again.');
      case 'unavailable':
        return unavailable(a, poll);
    }
    return fail(a.message);
  };
  worker.onerror = () => {
    clearTimeout(giveUp);
    fail('This browser could not run the check (Web Workers are needed).');
  };
  worker.postMessage({ salt: ch.salt, difficultyBits: ch.difficultyBits });
}

/** waitForFreshSalt shows the challenge step waiting for a salt it may solve. */
function waitForFreshSalt() {
  if (state.worker) state.worker.terminate();
  state.worker = null;
  show('challenge');
  $('pow-progress').style.width = '0%';
  note('pow-status', 'That puzzle has been used already (perhaps in another tab). Waiting for a fresh one…');
}

// ---- reserving -----------------------------------------------------------

function showAdmitted(token, expiresIn) {
  stopPolling();
  state.admission = { token };
  show('admitted');
  countdown('admission-countdown', expiresIn || 0);
  const limit = (state.sale && state.sale.policy && state.sale.policy.perUserLimit) || 1;
  $('quantity-row').hidden = limit <= 1;
  const sel = $('quantity');
  if (sel.options.length !== limit) {
    sel.replaceChildren(...Array.from({ length: limit }, (_, i) => new Option(String(i + 1), String(i + 1))));
  }
  $('reserve-go').disabled = false;
  note('reserve-note', '');
}

$('reserve-go').addEventListener('click', async () => {
  if (!state.admission) return;
  const button = $('reserve-go');
  button.disabled = true;
  note('reserve-note', 'Reserving…');
  const quantity = Number($('quantity').value || 1);
  // One click is one attempt: a fresh Idempotency-Key, repeated as it is
  // on each retry of a lost or busy answer, so no retry can buy twice.
  const a = await reserveAttempt(api, { admissionToken: state.admission.token, quantity, newKey }, {
    onRetry: (_, ms) => note('reserve-note', `The shop is busy; trying again in ${Math.ceil(ms / 1000)} s (the same request, so it cannot buy twice).`),
  });
  if (a.ok) {
    state.admission = null;
    state.reservation = { id: a.body.reservationId, quantity: a.body.quantity || quantity };
    store.set(reservationKey(), JSON.stringify({ id: state.reservation.id, quantity: state.reservation.quantity }));
    // Count down at once from the sale's hold time (at most a round trip
    // generous), then from the server's own figure: the reserve answer
    // carries only expiresAt, an absolute time on the server's clock.
    showReserved((state.sale && state.sale.policy && state.sale.policy.holdSeconds) || holdSeconds(a.body));
    return refineHold(state.reservation);
  }
  switch (a.code) {
    case 'sold_out':
      state.admission = null;
      return poll(); // sold out, final or not: the status says which
    case 'limit_reached':
      return fail('You already hold or have bought as many as this sale allows per shopper.');
    case 'admission_expired':
    case 'admission_invalid':
    case 'admission_required':
    case 'not_open':
      state.admission = null;
      return poll(); // a fresh admission, the place kept
    case 'admission_used':
      // One turn per place: a reservation spends the admission, and a hold
      // that expired or was released does not give the turn back (its
      // units went back to the shoppers still waiting).
      return fail('This turn has been used: a reservation was made with it (perhaps in another tab), ' +
        'and a hold that expires or is released does not give the turn back.');
    case 'sale_paused':
      state.admission = null;
      show('paused');
      return later(poll, pollDelay(a.retryAfter));
    case 'unauthenticated':
      return signOut('Your sign-in has expired. Please sign in again.');
    case 'not_eligible':
      return fail(a.message);
    case 'rate_limited': {
      const ms = pollDelay(a.retryAfter);
      note('reserve-note', `Too many attempts; you can try again in ${Math.ceil(ms / 1000)} s.`);
      setTimeout(() => { button.disabled = false; }, ms);
      return undefined;
    }
  }
  // Still busy after the retries: let the shopper try again (a new
  // attempt) while the turn lasts.
  note('reserve-note', 'The shop did not answer. Your turn is still kept: try again.');
  button.disabled = false;
  return undefined;
});

/**
 * holdSeconds is how long a reservation has left: expiresIn when the server
 * gives it, else expiresAt against this device's clock.
 */
function holdSeconds(body) {
  if (typeof body.expiresIn === 'number') return body.expiresIn;
  return Math.max(0, (Date.parse(body.expiresAt) - Date.now()) / 1000);
}

function showReserved(seconds) {
  stopPolling();
  show('reserved');
  const q = state.reservation.quantity;
  note('reserved-quantity', q === 1 ? '1 unit is' : `${q} units are`);
  countdown('hold-countdown', seconds);
  $('pay-go').disabled = false;
  $('cancel-go').textContent = 'Release this hold';
  note('reserved-note', '');
}

/** refineHold sets the hold's countdown from the server's expiresIn, quietly. */
async function refineHold(r) {
  const a = await api.reservation(r.id);
  if (a.ok && state.reservation === r && state.view === 'reserved' && typeof a.body.expiresIn === 'number') {
    countdown('hold-countdown', a.body.expiresIn);
  }
}

/** checkReservation asks what became of a hold (after a reload, or when its countdown ends). */
async function checkReservation() {
  const r = state.reservation;
  const a = await retrying(() => api.reservation(r.id));
  if (!a.ok) {
    if (a.code === 'unauthenticated') return signOut('Your sign-in has expired. Please sign in again.');
    if (a.status === 404) return forgetReservation(true);
    if (transient(a)) return unavailable(a, checkReservation);
    return fail(a.message);
  }
  const res = a.body;
  switch (res.state) {
    case 'pending': {
      const left = holdSeconds(res);
      if (left <= 0) {
        // Past its expiry by the server's clock: it can no longer be paid,
        // and the sweeper puts the unit back on sale.
        forgetReservation(false);
        return show('expired');
      }
      r.quantity = res.quantity;
      r.checking = false;
      return showReserved(left);
    }
    case 'confirmed':
      return showConfirmed(res.orderId);
    case 'expired':
      forgetReservation(false);
      return show('expired');
    case 'cancelled':
      forgetReservation(false);
      return show('cancelled');
  }
  return fail(`Unknown reservation state ${res.state}.`);
}

function forgetReservation(thenPoll) {
  store.del(reservationKey());
  state.reservation = null;
  if (thenPoll) start();
}

function showConfirmed(orderId) {
  stopPolling();
  show('confirmed');
  note('order-id', orderId);
}

$('pay-go').addEventListener('click', async () => {
  const r = state.reservation;
  if (!r) return;
  $('pay-go').disabled = true;
  note('reserved-note', 'Paying…');
  // The demo's payment: a made-up reference. Confirming again returns the
  // same order, so retries are safe.
  const ref = r.paymentRef || (r.paymentRef = `demo-pay-${newKey().slice(0, 12)}`);
  const a = await retrying(() => api.confirm(r.id, ref), {
    onRetry: (_, ms) => note('reserved-note', `The shop is busy; trying again in ${Math.ceil(ms / 1000)} s.`),
  });
  if (a.ok) {
    store.set(reservationKey(), JSON.stringify({ id: r.id, quantity: r.quantity }));
    return showConfirmed(a.body.orderId);
  }
  if (a.code === 'reservation_expired') { forgetReservation(false); return show('expired'); }
  if (a.code === 'reservation_cancelled') { forgetReservation(false); return show('cancelled'); }
  if (a.code === 'unauthenticated') return signOut('Your sign-in has expired. Please sign in again.');
  note('reserved-note', a.message || 'The payment did not go through; try again.');
  $('pay-go').disabled = false;
  return undefined;
});

// Releasing a hold takes two taps: the button is where a thumb rests.
$('cancel-go').addEventListener('click', async () => {
  const r = state.reservation;
  if (!r) return;
  const button = $('cancel-go');
  if (!r.confirmRelease) {
    r.confirmRelease = true;
    button.textContent = 'Tap again to release it';
    setTimeout(() => { r.confirmRelease = false; button.textContent = 'Release this hold'; }, 5000);
    return;
  }
  const a = await retrying(() => api.cancel(r.id));
  if (a.ok) { forgetReservation(false); return show('cancelled'); }
  if (a.code === 'reservation_expired') { forgetReservation(false); return show('expired'); }
  note('reserved-note', a.message || 'The hold could not be released; try again.');
  return undefined;
});

$('expired-back').addEventListener('click', () => start());
$('error-retry').addEventListener('click', () => boot());

// ---- start ---------------------------------------------------------------

async function boot() {
  stopPolling();
  show('loading');
  if (!sku) return fail('This address names no sale.');
  if (!(await loadSale())) return undefined;
  if (!state.jwt) {
    const jwt = initialJwt();
    if (!jwt || !signIn(jwt)) return showSignIn(jwt ? 'The saved sign-in was not a shopper token.' : '');
  }
  return start();
}

boot();
