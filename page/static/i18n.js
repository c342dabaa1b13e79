// The page's words: message catalogues (i18n/<lang>.json), chosen by the
// browser's languages, and Intl for numbers, plurals, times and durations.
// No word the page shows is written anywhere else.
//
// A catalogue maps a key to a message: text with {name} placeholders, or,
// for a message that depends on a count, an object of plural forms
// ({"one": "...", "other": "..."}, the forms Intl.PluralRules names for
// the language) chosen by the `count` variable.

/** The languages shipped; the first is the fallback for missing keys. */
export const LANGUAGES = ['en', 'de', 'fr', 'es', 'ja'];

/**
 * negotiate picks the first of the browser's languages the page has, by
 * exact tag or by its base language ("de-CH" → "de"); else the fallback.
 * @param {readonly string[]} preferred navigator.languages
 * @param {readonly string[]} [available]
 */
export function negotiate(preferred, available = LANGUAGES) {
  for (const tag of preferred || []) {
    const t = String(tag).toLowerCase();
    if (available.includes(t)) return t;
    const base = t.split('-')[0];
    if (available.includes(base)) return base;
  }
  return available[0];
}

/** languageName is the language's own name for itself ("Deutsch"). */
export function languageName(lang) {
  try {
    const name = new Intl.DisplayNames([lang], { type: 'language' }).of(lang);
    return name ? name.charAt(0).toLocaleUpperCase(lang) + name.slice(1) : lang;
  } catch {
    return lang;
  }
}

/**
 * loadCatalog fetches a language's catalogue; an empty one when it cannot
 * (the fallback's words are shown instead).
 */
export async function loadCatalog(lang, fetchFn = globalThis.fetch.bind(globalThis)) {
  try {
    const resp = await fetchFn(`/assets/i18n/${encodeURIComponent(lang)}.json`);
    return resp.ok ? await resp.json() : {};
  } catch {
    return {};
  }
}

/** Messages formats one language's words. */
export class Messages {
  /**
   * @param {string} lang
   * @param {Record<string, string|Record<string,string>>} catalog
   * @param {Record<string, string|Record<string,string>>} [fallback] English, for keys a catalogue misses
   */
  constructor(lang, catalog, fallback = {}) {
    this.lang = lang;
    this.catalog = catalog;
    this.fallback = fallback;
    this.plurals = new Intl.PluralRules(lang);
    this.numbers = new Intl.NumberFormat(lang);
    this.lists = typeof Intl.ListFormat === 'function' ? new Intl.ListFormat(lang, { style: 'long', type: 'unit' }) : null;
  }

  has(key) {
    return key in this.catalog || key in this.fallback;
  }

  /**
   * t is the message for key with its placeholders filled; numbers in
   * vars are formatted for the language. A missing key shows as itself,
   * so that it is seen (and the catalogue test catches it first).
   */
  t(key, vars = {}) {
    let msg = key in this.catalog ? this.catalog[key] : this.fallback[key];
    if (msg === undefined) return key;
    if (typeof msg === 'object' && msg !== null) {
      const form = this.plurals.select(Number(vars.count) || 0);
      msg = msg[form] ?? msg.other ?? '';
    }
    return String(msg).replace(/\{(\w+)\}/g, (whole, name) => {
      if (!(name in vars)) return whole;
      const v = vars[name];
      return typeof v === 'number' ? this.number(v) : String(v);
    });
  }

  number(n) {
    return this.numbers.format(n);
  }

  /** unit formats n of a unit (second, minute, hour, day) in words: "3 minutes". */
  unit(n, unit) {
    return new Intl.NumberFormat(this.lang, { style: 'unit', unit, unitDisplay: 'long' }).format(n);
  }

  /**
   * duration says a length of time in words, rounded up to what a person
   * needs: seconds under a minute, minutes under an hour, then hours and
   * five minutes. Rounding up keeps an estimate on the safe side, and the
   * minutes carry into the hour (59.5 minutes is "1 hour", never "60
   * minutes"; 1 h 58 min is "2 hours", never "1 hour, 60 minutes").
   */
  duration(seconds) {
    const s = Math.max(0, Math.ceil(seconds));
    if (s < 60) return this.unit(s, 'second');
    if (s < 3600) {
      const m = Math.ceil(s / 60);
      return m === 60 ? this.unit(1, 'hour') : this.unit(m, 'minute');
    }
    const total = Math.ceil(s / 300) * 5; // minutes, to five
    const h = Math.floor(total / 60);
    const m = total % 60;
    if (h >= 48 && m === 0) return this.unit(h / 24, 'day');
    const parts = [this.unit(h, 'hour')];
    if (m) parts.push(this.unit(m, 'minute'));
    return this.lists ? this.lists.format(parts) : parts.join(' ');
  }

  /** wait says an estimated wait: "under a minute", or "about 3 minutes". */
  wait(seconds) {
    if (Math.ceil(seconds) < 60) return this.t('wait.underMinute');
    return this.t('wait.about', { duration: this.duration(seconds) });
  }

  /** when is a moment in the shopper's own time zone: date and time. */
  when(date) {
    return new Intl.DateTimeFormat(this.lang, { dateStyle: 'medium', timeStyle: 'short' }).format(date);
  }

  /** time is a moment's time of day. */
  time(date) {
    return new Intl.DateTimeFormat(this.lang, { timeStyle: 'short' }).format(date);
  }
}

/**
 * placeholders lists a message's {names} (of every plural form).
 * @returns {string[]} sorted, without repeats
 */
export function placeholders(msg) {
  const texts = typeof msg === 'object' && msg !== null ? Object.values(msg) : [msg];
  const names = new Set();
  for (const text of texts) for (const m of String(text).matchAll(/\{(\w+)\}/g)) names.add(m[1]);
  return [...names].sort();
}

/**
 * translate fills an element tree's words from its data-i18n keys (the
 * text) and data-i18n-attr ("attr:key; attr:key"). Text is set as text,
 * never as markup.
 * @param {ParentNode} root
 * @param {Messages} m
 */
export function translate(root, m) {
  for (const el of root.querySelectorAll('[data-i18n]')) {
    el.textContent = m.t(el.dataset.i18n);
  }
  for (const el of root.querySelectorAll('[data-i18n-attr]')) {
    for (const pair of el.dataset.i18nAttr.split(';')) {
      const [attr, key] = pair.split(':').map((x) => x.trim());
      if (attr && key) el.setAttribute(attr, m.t(key));
    }
  }
}

/**
 * clock formats a number of seconds as m:ss, or h:mm:ss past an hour.
 */
export function clock(seconds) {
  const s = Math.max(0, Math.ceil(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}
