// Shared by the storefront and the console: JSON calls and a kind word for every error code.
'use strict';

/** Human messages for every `code` the API returns (api/openapi.yaml, ErrorCode). */
const MESSAGES = {
  malformed_json: 'The request was not understood. Reload the page and try again.',
  bad_event_id: 'This sale does not exist: check the link.',
  invalid_config: 'A value is out of range; check the form.',
  invalid_deny_list: 'Give 1–50 users and/or 1–50 IP addresses or CIDR ranges (203.0.113.0/24); user ids are printable ASCII without spaces.',
  bad_order_id: 'That order number is not valid.',
  bad_query: 'A parameter is out of range.',
  unauthorized: 'Please sign in again.',
  forbidden: 'This token may only read: an operator makes changes.',
  not_admitted: 'You have no admission for this sale. Reserve before it starts next time.',
  denied: 'This account cannot take part in this sale.',
  not_released: 'The sale opens to buyers in turns, and yours has not come yet. Try again in a moment.',
  not_selected: 'The lottery is drawn and you were not selected this time. Thank you for taking part.',
  bad_purchase_token: 'Your place expired. Press buy again.',
  event_not_found: 'This sale does not exist: check the link.',
  order_not_found: 'Your order is still being recorded. Try paying again in a moment.',
  not_found: 'Not found.',
  method_not_allowed: 'The page sent a request the server does not take. Reload the page.',
  already_bought: 'You already have an order for this sale (one per person).',
  order_expired: 'The payment window has closed; the item went back on sale.',
  conflict: 'That is not possible in the current state.',
  sold_out: 'Sold out. Every item has found a buyer.',
  sale_ended: 'The sale has ended.',
  admission_closed: 'All reservations are taken. You can still watch the sale.',
  unreadable_body: 'The connection broke off. Try again.',
  body_too_large: 'The request was too large.',
  too_early: 'The sale has not started yet.',
  admission_not_open: 'Reservations are not open yet.',
  bad_challenge: 'The reservation check expired. Press reserve again.',
  challenge_used: 'The reservation check was used already. Press reserve again.',
  challenge_required: 'The reservation check changed. Press reserve again.',
  bad_signature: 'A payment notice was refused: its signature did not check out.',
  worker_failed: 'This browser could not run the reservation check (a Web Worker). Try another browser.',
  rate_limited: 'Many people are buying right now. Please try again in a moment.',
  internal: 'Something went wrong on our side. We are looking into it.',
  sale_paused: 'The sale is paused for a moment. Stay on this page.',
  unavailable: 'The shop is very busy. Please try again in a moment.',
  demo_login_off: 'The demo sign-in is off on this server.',
  bad_user_id: 'A name is 1–128 letters, digits or symbols, without spaces.',
  network: 'No connection to the shop. Check your network; we keep trying.',
};

/**
 * The code of a refusal without the app's JSON, by status: the host (or a proxy) answers its own
 * refusals in plain text (too busy, a body too large, a body too slow), before any function runs.
 */
const HOST_REFUSALS = {408: 'network', 413: 'body_too_large', 503: 'unavailable'};

/** The message for an error code, or a generic one. */
function messageFor(code) {
  return MESSAGES[code] || `Unexpected answer (${code}).`;
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

/** `n` with thousands separators. */
function fmt(n) {
  return typeof n === 'number' ? n.toLocaleString('en-US') : String(n ?? '–');
}

/** `amount` in the currency's smallest unit (1999 `eur`) as a price (€19.99). */
function money(amount, currency) {
  try {
    const digits = new Intl.NumberFormat('en', {style: 'currency', currency}).resolvedOptions().maximumFractionDigits;
    return new Intl.NumberFormat(undefined, {style: 'currency', currency}).format(amount / 10 ** digits);
  } catch (e) { // not an ISO 4217 code
    return `${fmt(amount)} ${currency}`;
  }
}

/** `ms` as h:mm:ss (or m:ss). */
function duration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  const two = (x) => String(x).padStart(2, '0');
  return h ? `${h}:${two(m)}:${two(r)}` : `${m}:${two(r)}`;
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
