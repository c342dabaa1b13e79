// The waiting room's page: it shows what the SDK's waiting room
// (/sdk/flashsale.js, the module a shop's storefront uses too) reports, in the shopper's language, as the shop wants its sale to look
// (the sale's display), and makes every change known: in words to screen
// readers (an aria-live region, never each second of a countdown), in the
// tab's title, by moving focus to the action when the turn comes, and,
// for a shopper who asked, by a notification and a chime.
//
// Every word comes from the message catalogues (i18n.js); text is always
// set as text, never as markup.

import { browserStorage, JWT_KEY, newKey, WaitingRoom } from '/sdk/flashsale.js';
import { clock, LANGUAGES, languageName, loadCatalog, Messages, negotiate, translate } from './i18n.js';
import { TurnAlerts } from './alerts.js';

const $ = (id) => document.getElementById(id);
const LANG_KEY = 'flashsale:lang';
const demo = document.body.dataset.demo === 'true';

const sku = decodeURIComponent(location.pathname.split('/')[2] || '');

const ui = {
  m: null, // Messages
  fallback: {}, // the English catalogue
  sale: null,
  state: { view: 'loading' },
  user: '',
  deadlines: {}, // countdown element id -> performance.now() deadline (ms)
  firstAnnounced: {}, // view -> true once announced
  lastAnnounce: 0, // performance.now() of the last position announcement
  lastPosition: 0, // the place it said
  milestones: new Set(), // countdown milestones announced in this view
  notes: {}, // target -> {key, vars}
  releaseArmed: 0,
};

const alerts = new TurnAlerts(browserStorage);
// The shopper's JWT is kept across reloads: this page is where the shop's
// sign-in sends the shopper, with the JWT in the address's fragment.
const room = new WaitingRoom({ sku, jwtKey: JWT_KEY });
const api = room.api;
room.addEventListener('state', (e) => render(e.detail));
room.addEventListener('note', (e) => { ui.notes[e.detail.target] = e.detail; renderNote(e.detail); });
room.addEventListener('sale', (e) => { ui.sale = e.detail; renderSale(); });
room.addEventListener('user', (e) => { ui.user = e.detail; renderUser(); });

const t = (key, vars) => ui.m.t(key, vars);

// ---- languages -------------------------------------------------------------

async function useLanguage(lang) {
  const catalog = lang === 'en' ? ui.fallback : await loadCatalog(lang);
  ui.m = new Messages(lang, catalog, ui.fallback);
  document.documentElement.lang = lang;
  translate(document, ui.m);
  $('lang').value = lang;
  renderSale();
  renderUser();
  render(ui.state, true);
}

$('lang').addEventListener('change', (e) => {
  browserStorage.set(LANG_KEY, e.target.value);
  useLanguage(e.target.value);
});

// ---- the shop's display ------------------------------------------------------

/** webURL returns url if it is an http(s) URL, else '' (the server checks too). */
function webURL(url) {
  return typeof url === 'string' && /^https?:\/\//i.test(url) ? url : '';
}

function display() {
  return (ui.sale && ui.sale.display) || {};
}

function saleTitle() {
  return display().title || (ui.sale && (ui.sale.name || ui.sale.sku)) || sku;
}

/**
 * brand sets the shop's colour, with a text colour that reads on it
 * (black or white, whichever contrasts more: at least 4.5 to 1).
 */
function brand(hex) {
  const root = document.documentElement.style;
  if (!/^#[0-9a-f]{6}$/i.test(hex || '')) {
    root.removeProperty('--brand');
    root.removeProperty('--brand-text');
    return;
  }
  const lin = (c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
  const [r, g, b] = [1, 3, 5].map((i) => lin(parseInt(hex.slice(i, i + 2), 16) / 255));
  const l = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  const onWhite = 1.05 / (l + 0.05);
  const onBlack = (l + 0.05) / 0.05;
  root.setProperty('--brand', hex);
  root.setProperty('--brand-text', onBlack > onWhite ? '#000' : '#fff');
}

function image(el, url, alt) {
  const src = webURL(url);
  el.hidden = !src;
  if (src && el.getAttribute('src') !== src) el.src = src;
  el.alt = alt;
}

function renderSale() {
  const s = ui.sale;
  if (!s || !ui.m) return;
  const d = display();
  $('sale').hidden = false;
  $('about').hidden = false;
  brand(d.brandColor);
  image($('shop-logo'), d.logoUrl, t('brand.logo'));
  $('shop-name').hidden = !!webURL(d.logoUrl);
  image($('product-image'), d.imageUrl, saleTitle());
  $('sale-name').textContent = saleTitle();
  $('price').hidden = !d.priceText;
  $('price').textContent = d.priceText || '';
  $('description').hidden = !d.description;
  $('description').textContent = d.description || '';
  const opens = new Date(s.opensAt);
  $('sale-when').textContent = Number.isNaN(opens.getTime()) ? ''
    : t(s.state === 'scheduled' ? 'sale.opens' : 'sale.opened', { when: ui.m.when(opens) });
  const shop = webURL(d.shopUrl);
  for (const a of document.querySelectorAll('a.shop-link')) {
    a.hidden = !shop;
    if (shop) a.href = shop;
  }
  if ($('signin-shop')) {
    $('signin-shop').hidden = !shop || demo;
    if (shop) $('signin-shop').href = shop;
  }
  renderPolicy(s);
  renderTitle();
}

function renderPolicy(s) {
  const p = s.policy || {};
  const parts = [];
  if (['fifo', 'random', 'lottery'].includes(p.fairness)) parts.push(t(`policy.${p.fairness}`));
  if (p.fairness === 'lottery') {
    const closes = new Date(s.registrationClosesAt);
    if (!Number.isNaN(closes.getTime())) parts.push(t('policy.registrationCloses', { when: ui.m.when(closes) }));
    if (typeof p.lotteryWinners === 'number') parts.push(t('policy.lotteryWinners', { count: p.lotteryWinners }));
  }
  $('policy-fairness').textContent = parts.join(' ');
  $('policy-limit').textContent = t('policy.limit', { count: p.perUserLimit || 1 });
  $('policy-hold').textContent = t('policy.hold', { duration: ui.m.duration(p.holdSeconds || 0) });
  $('policy-age-row').hidden = !(p.minAccountAgeSeconds > 0);
  if (p.minAccountAgeSeconds > 0) $('policy-age').textContent = t('policy.accounts', { duration: ui.m.duration(p.minAccountAgeSeconds) });
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

function renderUser() {
  if (!ui.m) return;
  $('who').hidden = !ui.user;
  $('who-text').textContent = ui.user ? t('who.signedIn', { name: ui.user }) : '';
}

// ---- views -----------------------------------------------------------------

/** The views that keep the shopper waiting, where alerts may be asked for. */
const WAITING_VIEWS = new Set(['register', 'scheduled', 'waiting', 'challenge', 'paused', 'unavailable']);

/**
 * render shows a state the protocol reported. relang: the same state,
 * shown again in another language: nothing is announced, focused or
 * counted down anew.
 */
function render(s, relang = false) {
  const changed = s.view !== ui.state.view;
  ui.state = s;
  if (!ui.m) return;
  const fresh = changed && !relang;
  if (changed) {
    ui.milestones.clear();
    ui.notes = {};
    for (const id of ['reserve-note', 'reserved-note']) $(id).textContent = '';
  }
  show(s.view);
  // With no sale to show (none at this address), no product or details.
  $('sale').hidden = !ui.sale && s.view !== 'loading';
  $('about').hidden = !ui.sale;
  const fill = VIEWS[s.view];
  if (fill) fill(s, fresh, !relang);
  $('alerts').hidden = !WAITING_VIEWS.has(s.view) && !(s.view === 'sold_out' && !s.final);
  renderAlerts();
  if (fresh) {
    announceView(s);
    focusFor(s.view);
  }
  for (const n of Object.values(ui.notes)) renderNote(n);
  renderTitle();
}

function show(view) {
  document.body.dataset.view = view;
  for (const el of document.querySelectorAll('section.view')) el.hidden = el.dataset.view !== view;
}

/**
 * countdown makes the element count down seconds from now. The page
 * counts from the answers' relative times (opensInSeconds, expiresIn),
 * not from absolute ones against the device's clock, which may be wrong.
 */
function countdown(id, seconds) {
  ui.deadlines[id] = performance.now() + seconds * 1000;
  $(id).textContent = clock(seconds);
}

function remaining(id) {
  const d = ui.deadlines[id];
  return d === undefined ? 0 : Math.max(0, (d - performance.now()) / 1000);
}

const VIEWS = {
  signin(s, fresh) {
    $('signin-reason').hidden = !s.reason;
    $('signin-reason').textContent = s.reason ? t(`signin.${s.reason}`) : '';
    if (fresh && $('demo-name') && !$('demo-name').value) $('demo-name').value = `shopper-${newKey().slice(0, 4)}`;
  },
  register(s) {
    $('register-closes').textContent = s.closesAt ? t('register.closes', { when: ui.m.when(s.closesAt) }) : '';
    $('register-go').disabled = false;
  },
  scheduled(s, fresh, update) {
    if (update) countdown('open-countdown', s.opensIn);
    $('scheduled-place-row').hidden = !(s.position > 0);
    $('scheduled-place').textContent = s.position > 0 ? ui.m.number(s.position) : '';
    $('scheduled-note').textContent = ['fifo', 'random', 'lottery'].includes(s.fairness) ? t(`scheduled.${s.fairness}`) : '';
  },
  waiting(s) {
    $('position').textContent = ui.m.number(s.position);
    const done = s.firstPosition > 1 ? (s.firstPosition - s.position) / (s.firstPosition - 1) : 0;
    $('progress').style.width = `${Math.round(Math.min(1, Math.max(0.03, done)) * 100)}%`;
    $('wait').textContent = s.wait === null ? '–' : ui.m.wait(s.wait);
    $('units-left').textContent = s.unitsLeft === null ? '–' : ui.m.number(s.unitsLeft);
    const known = ['likely', 'possible', 'unlikely'].includes(s.chance);
    $('chance').textContent = known ? t(`chance.${s.chance}`) : '–';
    $('chance').dataset.chance = known ? s.chance : '';
    $('chance-note').textContent = known ? t(`chance.${s.chance}Note`) : '';
  },
  challenge(s) {
    $('pow-progress').style.width = `${Math.round((s.share || 0) * 100)}%`;
    const status = {
      starting: () => t('challenge.starting'),
      solving: () => t('challenge.progress', { rate: Math.round(s.rate), duration: ui.m.duration(s.secondsLeft) }),
      solved: () => t('challenge.solved', { duration: ui.m.unit(Math.max(0.1, Math.round(s.solvedIn * 10) / 10), 'second') }),
      refused: () => t('challenge.refused'),
      polling: () => t('challenge.polling'),
      reused: () => t('challenge.reused'),
    }[s.phase];
    $('pow-status').textContent = status ? status() : '';
  },
  admitted(s, fresh) {
    if (fresh) countdown('admission-countdown', s.expiresIn);
    $('quantity-row').hidden = s.limit <= 1;
    const sel = $('quantity');
    if (sel.options.length !== s.limit || fresh) {
      sel.replaceChildren(...Array.from({ length: s.limit }, (_, i) => new Option(ui.m.number(i + 1), String(i + 1))));
    } else {
      for (const o of sel.options) o.text = ui.m.number(Number(o.value));
    }
    if (fresh) $('reserve-go').disabled = false;
    if (fresh) {
      alerts.turn(t('notify.title'), t('notify.body', { clock: clock(s.expiresIn), title: saleTitle() }));
    }
  },
  reserved(s, fresh, update) {
    if (update) countdown('hold-countdown', s.expiresIn);
    $('reserved-quantity').textContent = t('reserved.held', { count: s.quantity });
    if ($('pay-go') && fresh) $('pay-go').disabled = false;
    const shop = webURL(display().shopUrl);
    if ($('checkout-go')) {
      $('checkout-go').hidden = !shop;
      if (shop) {
        const u = new URL(shop);
        u.searchParams.set('reservation', s.reservationId);
        $('checkout-go').href = u.href;
      }
    }
    if (fresh) disarmRelease();
  },
  confirmed(s) {
    $('order-id').textContent = s.orderId || '';
  },
  sold_out(s) {
    $('soldout-title').textContent = t(s.final ? 'soldout.title' : 'soldout.pendingTitle');
    $('soldout-pending').hidden = !!s.final;
    $('soldout-final').hidden = !s.final;
  },
  unavailable(s) {
    $('unavailable-when').textContent = t('unavailable.retry', { duration: ui.m.duration(s.retryIn) });
  },
  error(s) {
    const key = `error.${s.reason}`;
    $('error-text').textContent = ui.m.has(key) ? t(key) : t('error.generic');
    $('error-code').textContent = s.code ? t('error.code', { code: s.code }) : '';
  },
};

function renderNote(n) {
  const id = n.target === 'reserve' ? 'reserve-note' : 'reserved-note';
  const vars = { ...n.vars };
  if (typeof vars.seconds === 'number') vars.duration = ui.m.duration(vars.seconds);
  $(id).textContent = t(n.key, vars);
  if (n.target === 'reserve') {
    if (n.key === 'reserve.reserving' || n.key === 'reserve.busy') $('reserve-go').disabled = true;
    if (n.vars.again) $('reserve-go').disabled = false;
    if (n.key === 'reserve.tooMany') setTimeout(() => { $('reserve-go').disabled = false; }, n.vars.retryIn);
  } else if ($('pay-go')) {
    if (n.key === 'pay.paying' || n.key === 'pay.busy') $('pay-go').disabled = true;
    if (n.vars.again) $('pay-go').disabled = false;
  }
}

// ---- telling the shopper -------------------------------------------------------

/** announce says text to screen readers, politely, or at once (urgent). */
function announce(text, urgent = false) {
  const el = urgent ? $('alert') : $('announce');
  // A change of text is what a live region reads: clear it first, so
  // that the same words said twice are said again.
  el.textContent = '';
  setTimeout(() => { el.textContent = text; }, 50);
}

function announceView(s) {
  const sayTitle = () => {
    const section = document.querySelector(`section.view[data-view="${s.view}"]`);
    const h = section && section.querySelector('h2');
    const p = section && section.querySelector('h2 ~ p:not([hidden]), h2 ~ div:not([hidden]) > p');
    return [h && h.textContent, p && p.textContent].filter(Boolean).join('. ');
  };
  switch (s.view) {
    case 'loading':
      return;
    case 'scheduled':
      announce(s.position > 0
        ? t('announce.scheduledPlace', { position: s.position, duration: ui.m.duration(s.opensIn) })
        : t('announce.scheduled', { duration: ui.m.duration(s.opensIn) }));
      return;
    case 'waiting':
      ui.lastAnnounce = performance.now();
      ui.lastPosition = s.position;
      announce(t('announce.waiting', { position: s.position, wait: s.wait === null ? '–' : ui.m.wait(s.wait) }));
      return;
    case 'admitted':
      announce(t('announce.turn', { duration: ui.m.duration(s.expiresIn) }), true);
      return;
    case 'reserved':
      announce(t('announce.reserved', { duration: ui.m.duration(s.expiresIn) }));
      return;
    default:
      announce(sayTitle(), s.view === 'error');
  }
}

/** A waiting shopper hears the place again at most once a minute. */
const POSITION_EVERY_MS = 60_000;

/** focusFor moves focus where the shopper acts next, or keeps it from being lost. */
function focusFor(view) {
  const target = { admitted: 'reserve-go', reserved: $('pay-go') ? 'pay-go' : 'checkout-go' }[view];
  const el = target && $(target);
  if (el && !el.hidden) {
    el.focus();
    return;
  }
  // Focus that went away with the old view (a button the shopper used)
  // goes to the new view's heading, not back to the top of the page.
  const active = document.activeElement;
  const lost = active && active !== document.body && active.closest('[hidden]');
  if (lost) {
    const h = document.querySelector(`section.view[data-view="${view}"] h2`);
    if (h) h.focus({ preventScroll: true });
  }
}

function renderTitle() {
  if (!ui.m) return;
  const title = saleTitle();
  const s = ui.state;
  let text = t('app.title', { title });
  switch (s.view) {
    case 'scheduled':
      text = t('title.scheduled', { clock: clock(remaining('open-countdown')), title });
      break;
    case 'waiting':
      text = t('title.waiting', { position: s.position, title });
      break;
    case 'admitted':
      text = t('title.turn', { clock: clock(remaining('admission-countdown')) });
      break;
    case 'reserved':
      text = t('title.reserved', { clock: clock(remaining('hold-countdown')) });
      break;
    case 'sold_out':
      text = t('title.soldOut', { title });
      break;
    case 'confirmed':
      text = t('title.confirmed', { title });
      break;
  }
  if (document.title !== text) document.title = text;
}

/** tick moves the countdowns on, and says the milestones of the turn and the hold. */
function tick() {
  if (!ui.m) return;
  const s = ui.state;
  const ids = { scheduled: 'open-countdown', admitted: 'admission-countdown', reserved: 'hold-countdown' };
  const id = ids[s.view];
  if (id) {
    const left = remaining(id);
    $(id).textContent = clock(left);
    const marks = s.view === 'admitted' ? [60, 30] : s.view === 'reserved' ? [300, 60] : [];
    for (const mark of marks) {
      if (left <= mark && left > mark - 5 && !ui.milestones.has(mark)) {
        ui.milestones.add(mark);
        announce(t(s.view === 'admitted' ? 'announce.turnLeft' : 'announce.holdLeft', { duration: ui.m.duration(mark) }));
      }
    }
  }
  if (s.view === 'waiting' && performance.now() - ui.lastAnnounce > POSITION_EVERY_MS && ui.lastPosition !== s.position) {
    ui.lastAnnounce = performance.now();
    ui.lastPosition = s.position;
    announce(t('announce.waiting', { position: s.position, wait: s.wait === null ? '–' : ui.m.wait(s.wait) }));
  }
  renderTitle();
}
setInterval(tick, 250);

// ---- alerts ----------------------------------------------------------------------

function renderAlerts() {
  const on = alerts.enabled;
  $('alerts-go').hidden = on;
  $('alerts-note').hidden = !on;
  $('alerts-note').textContent = on ? t(alerts.notifications() ? 'alerts.on' : 'alerts.soundOnly') : '';
}

$('alerts-go').addEventListener('click', async () => {
  await alerts.enable();
  renderAlerts();
});

// ---- the shopper's actions ------------------------------------------------------

if ($('demo-go')) $('demo-go').addEventListener('click', () => room.signInDemo($('demo-name').value));
if ($('jwt-go')) $('jwt-go').addEventListener('click', () => room.signInWith($('jwt-input').value));
$('sign-out').addEventListener('click', () => room.signOut());
$('register-go').addEventListener('click', () => {
  $('register-go').disabled = true;
  room.register();
});
$('reserve-go').addEventListener('click', () => {
  $('reserve-go').disabled = true;
  room.reserve(Number($('quantity').value || 1));
});
if ($('pay-go')) $('pay-go').addEventListener('click', () => room.pay());

// Releasing a hold takes two taps: the button is where a thumb rests.
function disarmRelease() {
  clearTimeout(ui.releaseArmed);
  ui.releaseArmed = 0;
  $('cancel-go').textContent = t('reserved.release');
}
$('cancel-go').addEventListener('click', () => {
  if (!ui.releaseArmed) {
    $('cancel-go').textContent = t('reserved.releaseConfirm');
    ui.releaseArmed = setTimeout(disarmRelease, 5000);
    return;
  }
  disarmRelease();
  room.release();
});
$('expired-back').addEventListener('click', () => room.start());
$('error-retry').addEventListener('click', () => room.boot());

// ---- start -----------------------------------------------------------------------

/** The JWT from the address's fragment (#jwt=…), from the shop's sign-in. */
function fragmentJwt() {
  const m = /(?:^|[#&])jwt=([^&]+)/.exec(location.hash);
  if (!m) return undefined;
  // Keep the token out of the address bar (and out of screenshots and
  // shared links) once it is stored.
  history.replaceState(null, '', location.pathname + location.search);
  return decodeURIComponent(m[1]);
}

async function main() {
  for (const lang of LANGUAGES) $('lang').append(new Option(languageName(lang), lang));
  ui.fallback = await loadCatalog('en');
  const stored = browserStorage.get(LANG_KEY);
  const lang = LANGUAGES.includes(stored) ? stored : negotiate(navigator.languages || [navigator.language]);
  await useLanguage(lang);
  room.boot(fragmentJwt());
}

main();
