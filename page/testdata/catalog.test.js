// The page's words, checked: every catalogue has every key (with the same
// placeholders, and every plural form its language needs), no message
// carries markup, every key the page uses exists, and no word of the page
// (its HTML and its code) bypasses the catalogues.
// Run by page/js_test.go (go test ./page), from a directory holding the
// page's modules, index.html and i18n/.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { LANGUAGES, placeholders } from './i18n.js';

const read = (name) => readFileSync(new URL(`./${name}`, import.meta.url), 'utf8');
const catalogs = Object.fromEntries(LANGUAGES.map((lang) => [lang, JSON.parse(read(`i18n/${lang}.json`))]));
const en = catalogs.en;

/** The page's own code and the SDK's it runs on: every module but the proof of work's arithmetic and the tests. */
const CODE = readdirSync(new URL('.', import.meta.url))
  .filter((f) => f.endsWith('.js') && !f.endsWith('.test.js') && !['sha256.js', 'pow.js', 'pow-worker.js'].includes(f));

test('every catalogue is shipped and complete', () => {
  assert.deepEqual(readdirSync(new URL('./i18n/', import.meta.url)).sort(), LANGUAGES.map((l) => `${l}.json`).sort());
  for (const [lang, cat] of Object.entries(catalogs)) {
    const categories = new Intl.PluralRules(lang).resolvedOptions().pluralCategories;
    for (const key of Object.keys(en)) {
      assert.ok(key in cat, `${lang} misses ${key}`);
      const msg = cat[key];
      assert.deepEqual(placeholders(msg), placeholders(en[key]), `${lang} ${key}: placeholders`);
      if (typeof en[key] === 'object') {
        assert.equal(typeof msg, 'object', `${lang} ${key}: plural forms`);
        for (const c of categories) assert.ok(c in msg, `${lang} ${key} misses the plural form ${c}`);
      } else {
        assert.equal(typeof msg, 'string', `${lang} ${key}`);
      }
      for (const text of typeof msg === 'object' ? Object.values(msg) : [msg]) {
        assert.ok(text.trim(), `${lang} ${key} is empty`);
        assert.doesNotMatch(text, /[<>]/, `${lang} ${key}: messages are plain text, no markup`);
      }
    }
    for (const key of Object.keys(cat)) assert.ok(key in en, `${lang} has ${key}, which English has not`);
  }
});

test('every key the page uses exists', () => {
  const html = read('index.html');
  const used = new Set();
  for (const m of html.matchAll(/data-i18n="([^"]+)"/g)) used.add(m[1]);
  for (const m of html.matchAll(/data-i18n-attr="([^"]+)"/g)) {
    for (const pair of m[1].split(';')) used.add(pair.split(':')[1].trim());
  }
  for (const file of CODE) {
    const src = read(file);
    // t('key'), ui.m.t('key'), note(target, 'key'), and keys handed on in states.
    for (const m of src.matchAll(/\bt\(\s*'([a-zA-Z]+\.[a-zA-Z.]+)'/g)) used.add(m[1]);
    for (const m of src.matchAll(/note\(\s*'\w+',\s*'([a-zA-Z]+\.[a-zA-Z.]+)'/g)) used.add(m[1]);
    // t(`chance.${x}Note`): every value of the template the page passes.
    for (const m of src.matchAll(/\bt\(\s*`([a-z]+)\.\$\{[^}]+\}(\w*)`/g)) {
      const prefix = `${m[1]}.`;
      assert.ok(Object.keys(en).some((k) => k.startsWith(prefix) && k.endsWith(m[2])), `no key of ${m[0]}`);
    }
  }
  assert.ok(used.size > 100, `only ${used.size} keys found in use`);
  for (const key of used) assert.ok(key in en, `the page uses ${key}, which no catalogue has`);
  // The protocol's reasons and states, worded by the page.
  for (const reason of ['expired', 'notToken', 'savedNotToken', 'demoFailed']) assert.ok(`signin.${reason}` in en);
  for (const reason of ['noSale', 'noSku', 'notEligible', 'limitReached', 'admissionUsed', 'unknownState', 'pow', 'worker', 'generic']) {
    assert.ok(`error.${reason}` in en, `error.${reason}`);
  }
  for (const f of ['fifo', 'random', 'lottery']) assert.ok(`policy.${f}` in en && `scheduled.${f}` in en);
  for (const c of ['likely', 'possible', 'unlikely']) assert.ok(`chance.${c}` in en && `chance.${c}Note` in en);
});

test('the HTML has no word of its own: every text and label is a key', () => {
  let html = read('index.html')
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/\{\{[\s\S]*?\}\}/g, ''); // the template's directives
  html = html.replace(/<(script|style)\b[\s\S]*?<\/\1>/g, '');
  const texts = html.split(/<[^>]*>/).map((s) => s.trim()).filter(Boolean);
  for (const text of texts) assert.doesNotMatch(text, /\p{L}/u, `words in the HTML: ${JSON.stringify(text)}`);
  for (const m of html.matchAll(/\s(aria-label|alt|title|placeholder)="([^"]*)"/g)) {
    assert.doesNotMatch(m[2], /\p{L}/u, `words in the attribute ${m[1]}: ${m[2]}`);
  }
});

/**
 * literals returns the string and template literals of JavaScript source,
 * skipping comments and regular expressions.
 */
function literals(src) {
  const out = [];
  let i = 0;
  let prev = ''; // the last significant character of code
  while (i < src.length) {
    const c = src[i];
    const next = src[i + 1];
    if (c === '/' && next === '/') {
      i = src.indexOf('\n', i);
      if (i < 0) break;
      continue;
    }
    if (c === '/' && next === '*') {
      i = src.indexOf('*/', i + 2) + 2;
      continue;
    }
    if (c === '/' && (prev === '' || '(,=:[!&|?{};+-*%<>~^'.includes(prev) || /\breturn$/.test(src.slice(0, i).trimEnd()))) {
      // A regular expression: up to its closing slash, outside classes.
      let inClass = false;
      for (i++; i < src.length; i++) {
        if (src[i] === '\\') { i++; continue; }
        if (src[i] === '[') inClass = true;
        else if (src[i] === ']') inClass = false;
        else if (src[i] === '/' && !inClass) break;
      }
      i++;
      prev = '/';
      continue;
    }
    if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      let text = '';
      while (j < src.length && src[j] !== c) {
        if (src[j] === '\\') { text += src[j + 1]; j += 2; continue; }
        if (c === '`' && src[j] === '$' && src[j + 1] === '{') {
          // A template's expression: skip it, keeping its place.
          let depth = 1;
          j += 2;
          while (j < src.length && depth > 0) {
            if (src[j] === '{') depth++;
            else if (src[j] === '}') depth--;
            j++;
          }
          text += '${}';
          continue;
        }
        text += src[j];
        j++;
      }
      out.push(text);
      i = j + 1;
      prev = c;
      continue;
    }
    if (!/\s/.test(c)) prev = c;
    i++;
  }
  return out;
}

/** Strings of the protocol, not for people: HTTP header names and the like. */
const NOT_WORDS = new Set(['Bearer ${}', 'Accept', 'Authorization', 'Content-Type', 'Idempotency-Key', 'X-Admission-Token', 'X-Ticket', 'Retry-After']);

test("no string in the page's code is a word for people", () => {
  assert.ok(CODE.includes('app.js') && CODE.includes('flashsale.js') && CODE.includes('i18n.js'), CODE.join(' '));
  let seen = 0;
  for (const file of CODE) {
    for (const s of literals(read(file))) {
      seen++;
      if (NOT_WORDS.has(s)) continue;
      // A phrase (two words), or a capitalised word, is for people.
      assert.doesNotMatch(s, /\p{L}{2,}\s+\p{L}{2,}/u, `${file}: ${JSON.stringify(s)} is words: put it in the catalogues`);
      assert.doesNotMatch(s, /^\p{Lu}\p{Ll}+/u, `${file}: ${JSON.stringify(s)} is a word: put it in the catalogues`);
    }
  }
  assert.ok(seen > 200, `only ${seen} literals found: is the scanner reading the code?`);
  // And the scanner sees words where there are some.
  assert.ok(literals("const a = 'Hello there'; // not 'this'\nconst r = /it's/; const b = `Sold ${x} out`;")
    .includes('Hello there'));
  assert.deepEqual(literals("x = /a'b/g; y = 'c';"), ['c']);
});
