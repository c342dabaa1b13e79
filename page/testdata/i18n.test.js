// Unit tests of i18n.js: the choice of language, messages with plurals
// and placeholders, and durations and waits in words, rounded up.
// Run by page/js_test.go (go test ./page).
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { clock, LANGUAGES, Messages, negotiate, placeholders } from './i18n.js';

const catalog = (lang) => JSON.parse(readFileSync(new URL(`./i18n/${lang}.json`, import.meta.url), 'utf8'));
const en = catalog('en');
const messages = (lang) => new Messages(lang, catalog(lang), en);

test('the browser languages choose the catalogue, by tag or by base language', () => {
  assert.equal(negotiate(['de-CH', 'en']), 'de');
  assert.equal(negotiate(['pt-BR', 'fr-CA', 'de']), 'fr');
  assert.equal(negotiate(['JA']), 'ja');
  assert.equal(negotiate(['pt', 'zh']), 'en');
  assert.equal(negotiate([]), 'en');
  assert.deepEqual(LANGUAGES, ['en', 'de', 'fr', 'es', 'ja']);
});

test('messages fill placeholders, format numbers and pick plural forms', () => {
  const m = messages('en');
  assert.equal(m.t('who.signedIn', { name: 'ann' }), 'Signed in as ann');
  assert.equal(m.t('reserved.held', { count: 1 }), '1 unit is held for you.');
  assert.equal(m.t('reserved.held', { count: 2 }), '2 units are held for you.');
  assert.equal(m.t('title.waiting', { position: 12345, title: 'Kicks' }), 'No. 12,345 in line — Kicks');
  assert.equal(messages('de').t('title.waiting', { position: 12345, title: 'Kicks' }), 'Nr. 12.345 in der Schlange — Kicks');
  assert.equal(messages('de').t('reserved.held', { count: 1 }), '1 Stück ist für Sie reserviert.');
  assert.equal(m.t('no.such.key'), 'no.such.key');
  // A key a catalogue misses falls back to English.
  assert.equal(new Messages('de', {}, en).t('who.signOut'), 'Sign out');
  assert.deepEqual(placeholders(en['title.waiting']), ['position', 'title']);
});

test('durations are rounded up, and the minutes carry into the hour', () => {
  const m = messages('en');
  assert.equal(m.duration(30), '30 seconds');
  assert.equal(m.duration(61), '2 minutes');
  assert.equal(m.duration(60), '1 minute');
  assert.equal(m.duration(55 * 60), '55 minutes');
  // 56 to 59 minutes and a bit: an hour, never "60 minutes".
  for (const s of [59 * 60 + 1, 3599]) assert.equal(m.duration(s), '1 hour');
  assert.equal(m.duration(3600), '1 hour');
  assert.equal(m.duration(3600 + 11 * 60), '1 hour, 15 minutes');
  // 1 h 56 min to 2 h: two hours, never "1 hour, 60 minutes".
  assert.equal(m.duration(2 * 3600 - 60), '2 hours');
  assert.equal(m.duration(25 * 3600 + 30 * 60), '25 hours, 30 minutes');
  assert.equal(m.duration(72 * 3600), '3 days');
  for (let s = 0; s < 6 * 3600; s += 7) {
    assert.doesNotMatch(m.duration(s), /\b60 minutes\b/, `${s} s`);
  }
});

test('waits are said in each language, with Intl units', () => {
  assert.equal(messages('en').wait(30), 'under a minute');
  assert.equal(messages('en').wait(150), 'about 3 minutes');
  assert.equal(messages('de').wait(150), 'etwa 3 Minuten');
  assert.equal(messages('fr').wait(150), 'environ 3 minutes');
  assert.equal(messages('es').wait(150), 'unos 3 minutos');
  assert.match(messages('ja').wait(150), /^約 3\s?分$/);
  assert.equal(messages('de').wait(3 * 3600 + 600), 'etwa 3 Stunden, 10 Minuten');
});

test('clock counts down as m:ss, h:mm:ss past an hour', () => {
  assert.equal(clock(0), '0:00');
  assert.equal(clock(59.2), '1:00');
  assert.equal(clock(125), '2:05');
  assert.equal(clock(3725), '1:02:05');
});
