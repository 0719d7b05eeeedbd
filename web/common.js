// Shared by the landing page, the storefront and the console: their language, JSON calls, a
// kind word for every error code (the catalogues' `error.{code}`), back-off.
//
// The pages' language is chosen in the browser and never by the server: the pages are cached by
// path alone, so one cached page serves every language. The choice is the person's own (the
// switch in each page's header, kept in localStorage), else the first of the browser's languages
// the pages speak, else English. Every string the pages show is in one catalogue per language,
// web/i18n/{language}.json (held to the pages and to the API's error codes by functions/web's
// tests); numbers, prices, dates and durations are formatted by Intl in the same language.
'use strict';

// ---- the language ------------------------------------------------------------------------------
/** The languages the pages speak, each named in itself (the switch lists them). */
const LANGUAGES = {en: 'English', 'zh-CN': '简体中文'};
const LANGUAGE_KEY = 'seckill.lang';

/** The stored choice, else the browser's first language we speak (by its base: zh-TW reads zh-CN), else English. */
function chooseLanguage() {
  let stored = null;
  try { stored = localStorage.getItem(LANGUAGE_KEY); } catch (e) { /* storage blocked: not kept */ }
  if (Object.hasOwn(LANGUAGES, stored)) return stored;
  const ours = Object.keys(LANGUAGES);
  for (const tag of navigator.languages || [navigator.language]) {
    const lower = tag.toLowerCase(), base = lower.split('-')[0];
    const found = ours.find((l) => l.toLowerCase() === lower) || ours.find((l) => l.split('-')[0] === base);
    if (found) return found;
  }
  return 'en';
}

const LANG = chooseLanguage();
const NUMBER = new Intl.NumberFormat(LANG);
const TWO_DIGITS = new Intl.NumberFormat(LANG, {minimumIntegerDigits: 2, useGrouping: false});
const PLURAL = new Intl.PluralRules(LANG);
let CATALOGUE = {};

/**
 * The string `key` in the page's language, each `{name}` replaced by `params[name]` (numbers
 * formatted). A string with plural forms ({one, other}) takes the form `params.count` needs.
 */
function t(key, params = {}) {
  let s = CATALOGUE[key];
  if (s === undefined) return key;
  if (typeof s === 'object') s = s[PLURAL.select(params.count)] ?? s.other;
  return s.replace(/\{(\w+)\}/g, (whole, name) => {
    const v = params[name];
    return v === undefined ? whole : typeof v === 'number' ? NUMBER.format(v) : String(v);
  });
}

/** `n` with the language's separators. */
function fmt(n) {
  return typeof n === 'number' ? NUMBER.format(n) : String(n ?? '–');
}

/** `amount` in the currency's smallest unit (1999 `eur`) as a price (€19.99). */
function money(amount, currency) {
  try {
    const digits = new Intl.NumberFormat('en', {style: 'currency', currency}).resolvedOptions().maximumFractionDigits;
    return new Intl.NumberFormat(LANG, {style: 'currency', currency}).format(amount / 10 ** digits);
  } catch (e) { // not an ISO 4217 code
    return `${fmt(amount)} ${currency}`;
  }
}

/** `ms` as h:mm:ss (or m:ss), the countdown's form. */
function duration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  const two = (x) => TWO_DIGITS.format(x);
  return h ? `${NUMBER.format(h)}:${two(m)}:${two(r)}` : `${NUMBER.format(m)}:${two(r)}`;
}

/** An instant (Unix ms) as a date and time. */
function dateTime(ms) {
  return new Date(ms).toLocaleString(LANG);
}

/** An instant (Unix ms) as a time of day. */
function clockTime(ms) {
  return new Date(ms).toLocaleTimeString(LANG);
}

/** The page's own text: `data-i18n` (text), `data-i18n-label` (aria-label), `data-i18n-placeholder`; `<html lang>`. */
function translatePage() {
  document.documentElement.lang = LANG;
  document.querySelectorAll('[data-i18n]').forEach((el) => { el.textContent = t(el.dataset.i18n); });
  document.querySelectorAll('[data-i18n-label]').forEach((el) => el.setAttribute('aria-label', t(el.dataset.i18nLabel)));
  document.querySelectorAll('[data-i18n-placeholder]').forEach((el) => { el.placeholder = t(el.dataset.i18nPlaceholder); });
}

/** The header's switch: each language in its own name; a choice is kept and the page reloaded in it. */
function languageSwitch() {
  const select = document.getElementById('lang');
  select.replaceChildren(...Object.entries(LANGUAGES).map(([code, name]) => {
    const option = new Option(name, code, false, code === LANG);
    option.lang = code;
    return option;
  }));
  select.addEventListener('change', () => {
    try { localStorage.setItem(LANGUAGE_KEY, select.value); } catch (e) { return; }
    location.reload();
  });
}

/** The catalogue, asked again (doubling, at most 8 s) until it comes: the page has no words without it. */
async function loadCatalogue() {
  const url = document.querySelector(`meta[name="catalogue"][lang="${LANG}"]`).content;
  for (let wait = 500; ; wait = Math.min(wait * 2, 8000)) {
    try {
      const r = await fetch(url);
      if (r.ok) return await r.json();
    } catch (e) { /* no answer: asked again */ }
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/** Resolves once the page speaks its language: each page's script starts from it. */
const translated = loadCatalogue().then((catalogue) => {
  CATALOGUE = catalogue;
  translatePage();
  languageSwitch();
});

// ---- calls -------------------------------------------------------------------------------------

/**
 * The code of a refusal without the app's JSON, by status: the host (or a proxy) answers its own
 * refusals in plain text (too busy, a body too large, a body too slow), before any function runs.
 */
const HOST_REFUSALS = {408: 'network', 413: 'body_too_large', 503: 'unavailable'};

/** The message for an error code, or a generic one. */
function messageFor(code) {
  const key = `error.${code}`;
  const message = t(key);
  return message === key ? t('common.unexpected', {code}) : message;
}

/**
 * A JSON call. Resolves to {status, body, code, retryAfterMs, unrecorded}: `code` is the error
 * code for a refusal (or `network` when the request never got an answer), null on success;
 * `unrecorded` is true when an admin write happened but its audit record could not be stored.
 * `cache` is fetch's cache mode: `no-store` unless the route is cacheable and staleness fine.
 */
async function call(method, path, {bearer, body, cache = 'no-store'} = {}) {
  const headers = {};
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache});
  } catch (e) {
    return {status: 0, body: null, code: 'network', retryAfterMs: 2000, unrecorded: false};
  }
  let json = null;
  try { json = await resp.json(); } catch (e) { /* an empty or non-JSON body */ }
  const code = resp.ok ? null : (json && json.error && json.error.code) || HOST_REFUSALS[resp.status] || `http_${resp.status}`;
  const retry = Number(resp.headers.get('retry-after'));
  return {
    status: resp.status, body: json, code, retryAfterMs: Number.isFinite(retry) && retry > 0 ? retry * 1000 : 0,
    unrecorded: resp.headers.get('seckill-audit') === 'not-recorded',
  };
}

const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * How long to wait before asking again after answer `r` on the `attempt`-th try (0 first):
 * the server's Retry-After, or a second doubled each try, at most 8 s, plus up to as long
 * again of random jitter, so that a crowd told "come back" does not come back all at once.
 */
function backOffMs(r, attempt) {
  const base = Math.min(Math.max(r.retryAfterMs || 0, 1000 * 2 ** attempt), 8000);
  return base + Math.floor(Math.random() * base);
}
