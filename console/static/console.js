// The operator console: the sales, one sale live, and the operator's
// actions. Everything dynamic comes from the operator routes (api.js) and
// the live feed (feed.js); the charts are drawn here (chart.js).

import { AdminApi } from './api.js';
import { Feed } from './feed.js';
import { chartModel, draw, sparkline } from './chart.js';
import {
  ago, clock, codeName, fromUTCInput, perSecond, span, stateName, thousands, toUTCInput, when,
} from './format.js';

const TOKEN_KEY = 'flashsale.adminToken';
const HISTORY_MS = 15 * 60 * 1000;
const ORDERS_PAGE = 20;

const $ = (id) => document.getElementById(id);
const setText = (id, v) => { $(id).textContent = v; };
const show = (id, on) => { $(id).hidden = !on; };

const store = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

const api = new AdminApi({ token: store.get });

/** The console's state: what is shown, and what was last announced. */
const st = {
  needsToken: false,
  feed: null,
  sku: '',
  sale: null, // the last event `sale`
  points: [], // history: {t, unitsLeft, admissions, reserves, wins, rejections}
  told: {}, // what was last announced, by subject
  settingsDirty: false,
  displayDirty: false,
  version: 0,
  orders: [],
  ordersShown: 0,
  sales: new Map(), // sku -> the list's line
  lastEventAt: 0,
};

// ---- announcements ------------------------------------------------------

/** say reads a message out politely (or at once, urgent), once per change of what it is about. */
function say(subject, message, urgent = false) {
  if (st.told[subject] === message) return;
  const first = !(subject in st.told);
  st.told[subject] = message;
  if (first && !urgent) return; // the page's first figures are not news
  const region = $(urgent ? 'alarm' : 'announce');
  region.textContent = '';
  // A new text node in a live region is what screen readers announce.
  setTimeout(() => { region.textContent = message; }, 50);
}

// ---- views and routing ---------------------------------------------------

function view(name) {
  document.body.dataset.view = name;
  for (const s of document.querySelectorAll('section.view')) s.hidden = s.dataset.view !== name;
}

function setConn(state, detail = '') {
  const c = $('conn');
  c.dataset.state = state;
  const last = st.lastEventAt ? ` (last figures ${clock(st.lastEventAt)} UTC)` : '';
  const texts = {
    idle: 'Not connected',
    connecting: 'Connecting…',
    live: 'Live',
    retrying: `Reconnecting…${last}`,
    unauthorized: 'Signed out: the token was refused',
    gone: 'No such sale',
    stopped: 'Not connected',
  };
  setText('conn-text', texts[state] ?? state);
  if (state === 'live' || state === 'retrying') say('conn', state === 'live' ? 'Live figures connected.' : 'Live figures lost; reconnecting.');
  if (state === 'unauthorized') signIn('The server no longer accepts this token. Sign in again.');
}

function stopFeed() {
  if (st.feed) st.feed.stop();
  st.feed = null;
}

async function route() {
  stopFeed();
  const m = location.hash.match(/^#\/sale\/(.+)$/);
  if (m) return openSale(decodeURIComponent(m[1]));
  return openList();
}

// ---- sign in ---------------------------------------------------------------

function signIn(message = '') {
  stopFeed();
  store.clear();
  st.needsToken = true;
  show('sign-out', false);
  $('signin-error').textContent = message;
  show('signin-error', message !== '');
  setText('conn-text', 'Not connected');
  $('conn').dataset.state = 'idle';
  view('signin');
  $('token').focus();
}

async function start() {
  const a = await api.sales();
  if (a.status === 401) {
    return signIn(store.get() ? 'The server refused this token.' : '');
  }
  if (!a.ok) {
    view('sales');
    $('sales-error').textContent = a.status === 403
      ? 'This server has no admin token and answers operators only from its own machine (loopback). Open the console there, or start the server with --admin-token.'
      : `The server could not list the sales: ${a.message}`;
    show('sales-error', true);
    return;
  }
  st.needsToken = !!store.get();
  show('sign-out', st.needsToken);
  await route();
}

$('signin-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const tok = $('token').value.trim();
  if (!tok) return;
  store.set(tok);
  $('token').value = '';
  const a = await api.sales();
  if (a.status === 401) return signIn('The server refused this token.');
  st.needsToken = true;
  show('sign-out', true);
  say('signin', 'Signed in.');
  await route();
});

$('sign-out').addEventListener('click', () => signIn('Signed out.'));
window.addEventListener('hashchange', () => { route(); });

// ---- the sales ---------------------------------------------------------------

const ORDER = { open: 0, paused: 1, sold_out: 2, scheduled: 3, closed: 4 };

async function openList() {
  view('sales');
  document.title = 'Sales · operator console';
  const a = await api.sales();
  if (a.status === 401) return signIn('The server refused this token.');
  show('sales-error', !a.ok);
  if (!a.ok) {
    $('sales-error').textContent = `The server could not list the sales: ${a.message}`;
    return;
  }
  st.sales = new Map(a.body.sales.map((s) => [s.sku, { ...s, spark: [] }]));
  renderList();
  st.feed = new Feed({
    url: api.listURL(),
    token: store.get,
    onState: setConn,
    onEvent: (ev) => {
      if (ev.event !== 'sales') return;
      st.lastEventAt = Date.now();
      for (const line of JSON.parse(ev.data).sales) {
        const known = st.sales.get(line.sku) || {};
        st.sales.set(line.sku, { ...known, ...line });
      }
      renderList();
    },
  }).start();
}

function renderList() {
  const sales = [...st.sales.values()].sort((a, b) =>
    (ORDER[a.state] ?? 9) - (ORDER[b.state] ?? 9) || String(b.opensAt).localeCompare(String(a.opensAt)));
  show('sales-empty', sales.length === 0);
  const ul = $('sales-list');
  ul.replaceChildren(...sales.map((s) => {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.className = 'card sale-link';
    a.href = `#/sale/${encodeURIComponent(s.sku)}`;
    const head = document.createElement('div');
    head.className = 'row';
    const h = document.createElement('h2');
    h.textContent = s.name || s.sku;
    const badge = document.createElement('span');
    badge.className = 'badge';
    badge.dataset.state = s.state;
    badge.textContent = stateName(s.state);
    head.append(h, badge);
    const fig = document.createElement('p');
    fig.className = 'small';
    const left = s.counter === null || s.counter === undefined ? '–' : thousands(s.counter);
    fig.textContent = `${s.sku} · ${left} of ${thousands(s.initialStock)} units left · ${thousands(s.waiting ?? 0)} waiting` +
      (s.admissions ? ` · ${perSecond(s.admissions)} admitted/s` : '') +
      (s.invariantOk === false || (s.invariant && s.invariant.ok === false) ? ' · INVARIANT FAILED' : '');
    a.append(head, fig);
    if (s.spark && s.spark.length > 1) {
      a.append(sparkline(s.spark, s.initialStock, `Units left over the last minutes: from ${thousands(s.spark.find((v) => v !== null) ?? 0)} to ${left}`));
      const cap = document.createElement('p');
      cap.className = 'small muted';
      cap.textContent = 'units left, the last minutes';
      a.append(cap);
    }
    li.append(a);
    return li;
  }));
}

// ---- one sale ------------------------------------------------------------------

function openSale(sku) {
  view('sale');
  if (st.sku !== sku) {
    st.sku = sku;
    st.sale = null;
    st.points = [];
    st.told = {};
    st.settingsDirty = false;
    st.displayDirty = false;
    st.orders = [];
    show('orders-rows', false);
    show('orders-more', false);
    for (const id of ['action-result', 'settings-result', 'display-result', 'orders-result']) show(id, false);
  }
  setText('s-name', sku);
  setText('s-sku', sku);
  document.title = `${sku} · operator console`;
  st.feed = new Feed({
    url: api.liveURL(sku),
    token: store.get,
    onState: (state) => {
      setConn(state);
      if (state === 'gone') {
        setText('s-name', `No sale ${sku}`);
        show('s-errors', true);
        setText('s-errors', 'The server has no sale with this SKU.');
      }
    },
    onEvent: (ev) => {
      const d = JSON.parse(ev.data);
      if (ev.event === 'history') {
        st.points = d.points.map(point);
        return;
      }
      if (ev.event !== 'sale') return;
      st.lastEventAt = Date.now();
      const p = point({ ...d, ...d.rates, rejections: Object.values(d.rates.rejections || {}).reduce((a, b) => a + b, 0) });
      if (!st.points.length || st.points[st.points.length - 1].t < p.t) st.points.push(p);
      const cut = p.t - HISTORY_MS;
      while (st.points.length && st.points[0].t < cut) st.points.shift();
      renderSale(d);
    },
  }).start();
}

function point(p) {
  return {
    t: Date.parse(p.at),
    unitsLeft: p.unitsLeft !== undefined ? p.unitsLeft : p.counter,
    admissions: p.admissions ?? 0,
    reserves: p.reserves ?? 0,
    wins: p.wins ?? 0,
    rejections: p.rejections ?? 0,
  };
}

function renderSale(d) {
  const prev = st.sale;
  st.sale = d;
  const now = Date.parse(d.at);
  setText('s-name', d.name || d.sku);
  document.title = `${d.name || d.sku} · ${stateName(d.state)} · operator console`;
  const badge = $('s-state');
  badge.textContent = stateName(d.state);
  badge.dataset.state = d.state;
  const opens = Date.parse(d.opensAt);
  const whenText = [`opens ${when(opens)}`];
  if (d.closesAt) whenText.push(`closes ${when(Date.parse(d.closesAt))}`);
  whenText.push(`${d.fairness}`, `hold ${span(d.holdSeconds)}`, `${d.perUserLimit} per shopper`);
  setText('s-when', whenText.join(' · '));
  const paused = d.state === 'paused';
  show('s-reason', paused);
  if (paused) {
    const byOperator = d.pauseCause === 'operator';
    $('s-reason').dataset.cause = d.pauseCause || '';
    setText('s-reason', `${byOperator ? 'Paused by an operator' : 'Paused by the engine (fail closed)'}: ${d.pauseReason || 'no reason given'}`);
  }
  show('s-errors', !!(d.errors && d.errors.length));
  if (d.errors && d.errors.length) setText('s-errors', `Figures not read this second: ${d.errors.join(', ')}.`);

  // Units left.
  const left = d.counter;
  setText('f-left', left === null ? '–' : thousands(left));
  setText('f-initial', thousands(d.initialStock));
  $('f-left-bar').style.width = `${left === null ? 0 : Math.max(0, Math.min(100, (100 * left) / Math.max(d.initialStock, 1)))}%`;
  let soldOut = '';
  if (d.soldOutAt) {
    const at = Date.parse(d.soldOutAt);
    soldOut = `Sold out at ${clock(at)} UTC, ${span((at - opens) / 1000)} after the open.`;
    if (d.pending > 0) soldOut += ` ${thousands(d.pending)} units still held may come back.`;
  } else if (left === null) {
    soldOut = { not_loaded: 'The gate holds no counter yet (it is loaded before the open).', unreachable: 'The stock gate does not answer.', retired: 'The sale is over and retired from the gate.' }[d.gate] || '';
  } else if (now < opens) {
    soldOut = `Opens in ${span((opens - now) / 1000)}.`;
  } else {
    soldOut = `${Math.round((100 * left) / Math.max(d.initialStock, 1))}% left.`;
  }
  setText('f-soldout', soldOut);

  setText('f-waiting', thousands(d.waiting));
  setText('f-admitted', thousands(d.admittedUpTo));
  setText('f-adm', perSecond(d.rates.admissions));
  setText('f-target', d.admissionPerSecond > 0 ? `${thousands(d.admissionPerSecond)}/s` : 'everyone at the open');
  setText('f-res', perSecond(d.rates.reserves));
  setText('f-wins', perSecond(d.rates.wins));
  setText('f-pending', thousands(d.pending));
  setText('f-expired', thousands(d.expired));
  setText('f-cancelled', thousands(d.cancelled + (d.voided || 0)));
  setText('f-confirmed', thousands(d.confirmed));

  // The invariant.
  const inv = d.invariant || {};
  const tile = $('t-invariant');
  tile.dataset.bad = String(!inv.ok);
  tile.dataset.good = String(!!inv.ok && !!inv.checkedAt);
  setText('f-inv', inv.ok ? 'Holds' : 'FAILED');
  setText('f-inv-detail', inv.checkedAt
    ? `checked ${ago(Date.parse(inv.checkedAt), now)} · difference ${inv.difference}${inv.reason ? ` · ${inv.reason}` : ''}`
    : 'not checked yet (checked every second while the sale is active)');

  renderCharts(d, now);
  renderRejections(d);
  renderHealth(d, now);
  renderActions(d);
  fillSettings(d);

  // What changed, for screen readers.
  const name = d.name || d.sku;
  say('state', `${name} is ${stateName(d.state).toLowerCase()}${paused ? `: ${d.pauseReason}` : ''}.`, paused && d.pauseCause !== 'operator');
  say('invariant', inv.ok ? 'The invariant holds.' : `The invariant FAILED: difference ${inv.difference}. The sale was paused.`, !inv.ok);
  if (prev && d.soldOutAt && !prev.soldOutAt) say('soldout', `${name} sold out at ${clock(Date.parse(d.soldOutAt))} UTC.`);
}

/** chartWidth is the chart's width on screen, so that its text is drawn at the size the page sets. */
function chartWidth(id) {
  return Math.max(280, Math.round($(id).getBoundingClientRect().width) || 640);
}

function renderCharts(d, now) {
  const pts = st.points;
  const t0 = pts.length ? Math.min(pts[0].t, now - 60000) : now - 60000;
  const units = chartModel({
    series: [{ name: 'units left', cls: 'series-0', points: pts.map((p) => [p.t, p.unitsLeft]) }],
    t0, t1: now, width: chartWidth('c-units'), height: 200, yMax: d.initialStock,
  });
  draw($('c-units'), units);
  $('c-units').setAttribute('aria-label', `Units left over time: ${d.counter === null ? 'unknown' : thousands(d.counter)} of ${thousands(d.initialStock)} now`);
  const rates = chartModel({
    series: [
      { name: 'admissions', cls: 'series-0', points: pts.map((p) => [p.t, p.admissions]) },
      { name: 'reserves', cls: 'series-1', points: pts.map((p) => [p.t, p.reserves]) },
      { name: 'units taken', cls: 'series-2', points: pts.map((p) => [p.t, p.wins]) },
      { name: 'rejections', cls: 'series-3', points: pts.map((p) => [p.t, p.rejections]) },
    ],
    t0, t1: now, width: chartWidth('c-rates'), height: 200, rate: true,
  });
  draw($('c-rates'), rates);
  $('c-rates').setAttribute('aria-label', `A second, now: ${perSecond(d.rates.admissions)} admissions, ${perSecond(d.rates.reserves)} reserves, ${perSecond(d.rates.wins)} units taken`);
}

function renderRejections(d) {
  const totals = d.rejections || {};
  const rates = d.rates.rejections || {};
  const codes = [...new Set([...Object.keys(totals), ...Object.keys(rates)])]
    .sort((a, b) => (totals[b] ?? 0) - (totals[a] ?? 0) || a.localeCompare(b));
  show('rej-none', codes.length === 0);
  $('rej-rows').replaceChildren(...codes.map((c) => {
    const tr = document.createElement('tr');
    const name = document.createElement('td');
    name.textContent = `${codeName(c)} `;
    const code = document.createElement('code');
    code.textContent = c;
    name.append(code);
    const r = document.createElement('td');
    r.className = 'num';
    r.textContent = perSecond(rates[c] ?? 0);
    const n = document.createElement('td');
    n.className = 'num';
    n.textContent = thousands(totals[c] ?? 0);
    tr.append(name, r, n);
    return tr;
  }));
}

/** health fills the health list: a label, a short value (good, warn or bad), and a line of detail. */
function health(items) {
  const out = [];
  for (const [label, value, kind, detail] of items) {
    const dt = document.createElement('dt');
    dt.textContent = label;
    const dd = document.createElement('dd');
    if (kind) dd.className = kind;
    dd.textContent = value;
    out.push(dt, dd);
    if (detail) {
      const more = document.createElement('dd');
      more.className = 'detail';
      more.textContent = detail;
      out.push(more);
    }
  }
  $('health').replaceChildren(...out);
}

function renderHealth(d, now) {
  const items = [];
  const gate = {
    loaded: ['loaded', 'good', ''],
    not_loaded: ['not loaded', 'warn', 'The warmer loads the counter before the open.'],
    unreachable: ['UNREACHABLE', 'bad', 'The sale fails closed: reserves are refused until the gate answers.'],
    retired: ['retired', '', 'The sale is over; the gate forgot it.'],
  }[d.gate] || [d.gate, '', ''];
  items.push(['Stock gate', ...gate]);
  const opens = Date.parse(d.opensAt);
  if (d.warm) items.push(['Warm', 'yes', 'good', 'The counter is loaded and every edge holds the sale.']);
  else items.push(['Warm', now < opens ? 'not yet' : 'no', now < opens ? 'warn' : '', '']);
  if (d.pacing) {
    const p = d.pacing;
    items.push(['Pacing', `${perSecond(p.rate)}/s${p.healthy ? '' : ', backing off'}`, p.healthy ? '' : 'warn',
      `${p.healthy ? 'Reserves are fast and succeed.' : 'Reserves are slow or failing: admissions slowed.'} ` +
      `${thousands(p.outstanding)} admitted and not yet reserved; room for ${thousands(p.capacity)} more before the stock limits it.`]);
  } else {
    items.push(['Pacing', d.admissionPerSecond > 0 ? 'not yet' : 'none', '', d.admissionPerSecond > 0 ? '' : 'Everyone is admitted at the open.']);
  }
  const edges = d.edges || [];
  if (edges.length === 0) {
    items.push(['Edges', 'none', '', 'No edge fetched this sale: the waiting room runs on this server.']);
  } else {
    const missing = edges.filter((e) => !e.hasSale);
    const stale = edges.filter((e) => now - Date.parse(e.lastSeen) > 5000);
    items.push(['Edges', `${edges.length}${missing.length || stale.length ? ', not all ready' : ', all ready'}`,
      missing.length || stale.length ? 'warn' : 'good',
      (missing.length ? `Without the sale: ${missing.map((e) => e.id).join(', ')}. ` : '') +
      (stale.length ? `Not refreshing: ${stale.map((e) => `${e.id} (${ago(Date.parse(e.lastSeen), now)})`).join(', ')}.` : '')]);
  }
  if (d.outbox) {
    const lag = d.outbox.lagSeconds;
    items.push(['Outbox', `${thousands(d.outbox.pending)} waiting`, lag > 30 ? 'bad' : '',
      d.outbox.pending ? `The oldest event waits for ${span(lag)}${lag > 30 ? ': the relay is behind' : ''}.` : '']);
    items.push(['Dead letters', thousands(d.outbox.dead), d.outbox.dead > 0 ? 'bad' : '',
      d.outbox.dead > 0 ? 'Events the sink refused for good: flashsale outbox dead, then replay.' : '']);
  } else {
    items.push(['Outbox', 'not read', '', '']);
  }
  items.push(['Held as automation', thousands(d.heldAsAutomation || 0), '', '']);
  if (d.invites) {
    const i = d.invites;
    items.push(['Invite codes', `${thousands(i.redeemed)} of ${thousands(i.issued)} redeemed`, '',
      `${thousands(i.won)} invited shoppers hold or bought a unit. Issue more: flashsale sale invites ${d.sku} --count N.`]);
  }
  if (d.notifiedAdmissionSeconds > 0) {
    items.push(['Turn notifications', 'on', '',
      `shopper.turn goes out through the outbox when a turn comes; the admission then lasts ${span(d.notifiedAdmissionSeconds)}.`]);
  }
  health(items);
}

function renderActions(d) {
  const paused = d.state === 'paused';
  const over = d.state === 'closed';
  $('a-pause').disabled = paused || over;
  $('a-resume').disabled = !paused;
  $('a-rebuild').disabled = !paused;
  setText('actions-hint', paused
    ? 'Nothing is sold while paused. Rebuild the counter if the gate lost it or the invariant failed, then resume.'
    : over ? 'The sale is closed.' : '');
  show('actions-hint', paused || over);
}

// ---- confirmations -------------------------------------------------------------

/** confirmAction asks the operator, saying what the action does; it resolves to the reason typed (pause) or true, or null when declined. */
function confirmAction({ title, text, ok, reason = false, danger = false }) {
  const dlg = $('confirm');
  setText('confirm-title', title);
  setText('confirm-text', text);
  setText('confirm-ok', ok);
  $('confirm-ok').className = danger ? 'danger' : 'primary';
  show('confirm-reason-box', reason);
  $('confirm-reason').value = '';
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => {
      if (dlg.returnValue !== 'ok') return resolve(null);
      resolve(reason ? $('confirm-reason').value.trim() : true);
    }, { once: true });
    dlg.returnValue = '';
    dlg.showModal();
    (reason ? $('confirm-reason') : $('confirm-cancel')).focus();
  });
}

function result(id, kind, message) {
  const p = $(id);
  p.dataset.kind = kind;
  // The time says how old the message is when the figures have moved on.
  p.textContent = `${clock(Date.now())} · ${message}`;
  p.hidden = false;
  say(id, message, kind === 'error');
}

function failed(a) {
  return a.status === 0 ? 'The server did not answer; nothing was changed that we know of. Try again.' : `${a.message} (${a.code})`;
}

$('a-pause').addEventListener('click', async () => {
  const d = st.sale;
  const reason = await confirmAction({
    title: `Pause ${d.name || d.sku}?`,
    text: 'Reserves are refused with “sale paused” at once and shoppers keep their place in the waiting room. Holds already made stay, and can still be paid. Nothing more is sold until you resume.',
    ok: 'Pause the sale', reason: true, danger: true,
  });
  if (reason === null) return;
  const a = await api.pause(d.sku, reason);
  result('action-result', a.ok ? 'ok' : 'error', a.ok ? 'Paused. Shoppers are told the sale is paused.' : `Not paused: ${failed(a)}`);
});

$('a-resume').addEventListener('click', async () => {
  const d = st.sale;
  const ok = await confirmAction({
    title: `Resume ${d.name || d.sku}?`,
    text: `Reserves are taken again from the units left (${d.counter === null ? 'the gate holds no counter: rebuild it first' : thousands(d.counter)}). The server refuses if the gate's counter cannot be vouched for.`,
    ok: 'Resume the sale',
  });
  if (!ok) return;
  const a = await api.resume(d.sku);
  result('action-result', a.ok ? 'ok' : 'error', a.ok ? 'Resumed: the sale sells again.' : `Not resumed: ${failed(a)}`);
});

$('a-rebuild').addEventListener('click', async () => {
  const d = st.sale;
  const ok = await confirmAction({
    title: 'Rebuild the counter from the record?',
    text: `The gate's counter is set to initial − confirmed − pending (${thousands(d.initialStock)} − ${thousands(d.confirmed)} − ${thousands(d.pending)} = ${thousands(d.initialStock - d.confirmed - d.pending)}), its holds are reloaded from the record, and a new epoch voids every admission token given before. The sale stays paused: resume it afterwards.`,
    ok: 'Rebuild the counter',
  });
  if (!ok) return;
  const a = await api.rebuild(d.sku);
  result('action-result', a.ok ? 'ok' : 'error', a.ok ? `Rebuilt: ${thousands(a.body.counter)} units left. The sale is still paused.` : `Not rebuilt: ${failed(a)}`);
});

// ---- settings (If-Match) ---------------------------------------------------------

function fillSettings(d) {
  setText('set-version', String(d.version));
  // The live figures refill the form unless the operator is editing it:
  // changed, or only just focused (about to type).
  const editing = (form) => form.contains(document.activeElement);
  if (!st.settingsDirty && !editing($('settings-form'))) {
    st.version = d.version;
    $('set-rate').value = String(d.admissionPerSecond);
    $('set-closes').value = toUTCInput(d.closesAt);
  }
  if (!st.displayDirty && !editing($('display-form'))) {
    const v = d.display || {};
    $('d-title').value = v.title || '';
    $('d-price').value = v.priceText || '';
    $('d-description').value = v.description || '';
    $('d-image').value = v.imageUrl || '';
    $('d-logo').value = v.logoUrl || '';
    $('d-shop').value = v.shopUrl || '';
    $('d-color').value = v.brandColor || '';
  }
}

$('settings-form').addEventListener('input', () => { st.settingsDirty = true; });
$('display-form').addEventListener('input', () => { st.displayDirty = true; });

/** conflict says what moved meanwhile, from the sale as it is now. */
async function conflict(id, describe) {
  const now = await api.sale(st.sku);
  if (!now.ok) return result(id, 'conflict', 'Changed meanwhile by someone else; reload to see how.');
  st.version = now.body.version;
  result(id, 'conflict', `Changed meanwhile: the sale is now at version ${now.body.version}, with ${describe(now.body)}. Your values are still in the form: save again to apply them over these.`);
}

$('settings-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const d = st.sale;
  const changes = {};
  const rate = $('set-rate').value.trim();
  if (rate !== String(d.admissionPerSecond)) {
    if (!/^\d+$/.test(rate)) return result('settings-result', 'error', 'Admissions a second must be a whole number, 0 or more.');
    changes.admissionPerSecond = Number(rate);
  }
  const closes = fromUTCInput($('set-closes').value);
  if (closes === null) return result('settings-result', 'error', 'Closes at must be a UTC time such as 2026-08-01 18:00:00.');
  if (closes !== (d.closesAt ? fromUTCInput(toUTCInput(d.closesAt)) : '')) {
    if (closes === '') return result('settings-result', 'error', 'A closing time can be moved but not removed.');
    changes.closesAt = closes;
  }
  if (Object.keys(changes).length === 0) return result('settings-result', 'ok', 'Nothing to save: the form says what the sale has.');
  const a = await api.patch(d.sku, st.version, changes);
  if (a.ok) {
    st.settingsDirty = false;
    st.version = a.body.version;
    return result('settings-result', 'ok', `Saved: ${describeSettings(a.body)} (version ${a.body.version}).`);
  }
  if (a.code === 'version_conflict') return conflict('settings-result', describeSettings);
  result('settings-result', 'error', `Not saved: ${failed(a)}`);
});

function describeSettings(s) {
  return `${s.admissionPerSecond > 0 ? `${thousands(s.admissionPerSecond)} admissions a second` : 'everyone admitted at the open'}, ` +
    (s.closesAt ? `closing ${when(Date.parse(s.closesAt))}` : 'no closing time');
}

$('display-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const d = st.sale;
  const display = {
    title: $('d-title').value.trim(), description: $('d-description').value.trim(), imageUrl: $('d-image').value.trim(),
    priceText: $('d-price').value.trim(), shopUrl: $('d-shop').value.trim(), brandColor: $('d-color').value.trim(),
    logoUrl: $('d-logo').value.trim(),
  };
  for (const k of Object.keys(display)) if (display[k] === '') delete display[k];
  if (display.brandColor && !/^#[0-9a-fA-F]{6}$/.test(display.brandColor)) {
    return result('display-result', 'error', 'The brand colour is #rrggbb, e.g. #1656d8.');
  }
  const a = await api.patch(d.sku, st.version, { display });
  if (a.ok) {
    st.displayDirty = false;
    st.version = a.body.version;
    return result('display-result', 'ok', `Saved what shoppers see (version ${a.body.version}).`);
  }
  if (a.code === 'version_conflict') return conflict('display-result', (s) => `title “${(s.display && s.display.title) || ''}”`);
  if (a.code === 'bad_request' && /display/.test(a.message)) {
    return result('display-result', 'error', 'This server does not take a display yet (it is older than this console).');
  }
  result('display-result', 'error', `Not saved: ${failed(a)}`);
});

// ---- orders -----------------------------------------------------------------------

const MOVES = {
  confirmed: ['ship', 'cancel', 'refund'],
  shipped: ['refund'],
};

async function loadOrders() {
  const a = await api.orders(st.sku);
  if (!a.ok) return result('orders-result', 'error', `Could not list the orders: ${failed(a)}`);
  st.orders = a.body.orders.sort((x, y) => String(y.createdAt).localeCompare(String(x.createdAt)));
  st.ordersShown = Math.max(st.ordersShown, ORDERS_PAGE);
  show('orders-rows', true);
  setText('orders-load', 'Reload the orders');
  renderOrders();
  if (st.orders.length === 0) result('orders-result', 'ok', 'No order yet.');
}

function renderOrders() {
  const rows = st.orders.slice(0, st.ordersShown).map((o) => {
    const li = document.createElement('li');
    const head = document.createElement('p');
    const who = document.createElement('b');
    who.textContent = o.userId;
    const state = document.createElement('span');
    state.className = `order-state ${o.state}`;
    state.textContent = o.state;
    head.append(who, ` · ${o.quantity} unit${o.quantity === 1 ? '' : 's'} · `, state, ` · ${clock(Date.parse(o.createdAt))} UTC`);
    const id = document.createElement('code');
    id.textContent = o.orderId;
    const acts = document.createElement('div');
    acts.className = 'order-actions';
    for (const to of MOVES[o.state] || []) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = { ship: 'Ship', cancel: 'Cancel', refund: 'Refund' }[to];
      b.setAttribute('aria-label', `${b.textContent} order ${o.orderId} of ${o.userId}`);
      b.addEventListener('click', () => moveOrder(o, to));
      acts.append(b);
    }
    li.append(head, id, acts);
    return li;
  });
  $('orders-rows').replaceChildren(...rows);
  show('orders-more', st.orders.length > st.ordersShown);
  setText('orders-more', `Show more (${thousands(st.orders.length - st.ordersShown)} more)`);
}

async function moveOrder(o, to) {
  const texts = {
    ship: ['Mark the order shipped?', `Order ${o.orderId} of ${o.userId} is marked shipped (order.shipped goes out). It can still be refunded.`, 'Mark shipped'],
    cancel: ['Cancel the order?', `Order ${o.orderId} of ${o.userId} is cancelled and its ${o.quantity} unit(s) go back to stock, to be sold again while the sale is open.`, 'Cancel the order'],
    refund: ['Refund the order?', `Order ${o.orderId} of ${o.userId} is refunded and its ${o.quantity} unit(s) go back to stock. The payment itself is refunded by your payment provider, not here.`, 'Refund the order'],
  }[to];
  const ok = await confirmAction({ title: texts[0], text: texts[1], ok: texts[2], danger: to !== 'ship' });
  if (!ok) return;
  const a = await api.moveOrder(o.orderId, to, o.version);
  if (a.ok) {
    result('orders-result', 'ok', `Order ${o.orderId}: ${a.body.state}.`);
  } else if (a.code === 'version_conflict') {
    result('orders-result', 'conflict', `Order ${o.orderId} changed meanwhile; the list is reloaded with its new state.`);
  } else {
    result('orders-result', 'error', `Order ${o.orderId} not changed: ${failed(a)}`);
  }
  await loadOrders();
}

$('orders-load').addEventListener('click', loadOrders);
$('orders-more').addEventListener('click', () => {
  st.ordersShown += ORDERS_PAGE;
  renderOrders();
});

start();
