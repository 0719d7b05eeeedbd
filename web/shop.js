// The storefront: sign in, reserve (a proof of work), count down on the server's clock, buy
// once, wait, pay at the payment provider.
'use strict';

const S = {
  event: null, info: null, jwt: null, user: null,
  admission: null,        // admission token
  reserving: false,       // an admission in flight (solving its challenge, perhaps)
  purchase: null,         // {token, until} (until: performance.now() deadline)
  prechecking: null,      // the precheck in flight (a promise)
  locked: false,          // the buy button, once clicked
  order: null,            // order id once bought
  final: false,           // a final result is shown: no more polling
  paying: false,          // the provider's checkout was opened
  pollTimer: 0,
};

// ---- the server's clock ---------------------------------------------------------------
// Offset measured against GET /api/time and carried forward with performance.now(), which a
// changed system clock does not move: the sale opens when the server says, whatever the device.
const clock = {base: 0, at: 0, synced: false};

async function syncClock() {
  let best = Infinity;
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    const r = await call('GET', '/api/time');
    const t1 = performance.now();
    if (r.code || t1 - t0 >= best) continue;
    best = t1 - t0;
    clock.base = r.body.now_ms + best / 2;
    clock.at = t1;
    clock.synced = true;
  }
}

function serverNow() {
  return clock.base + (performance.now() - clock.at);
}

// ---- status ----------------------------------------------------------------------------
function say(text, tone = '') {
  const el = $('status');
  if (el.textContent !== text) el.textContent = text;
  el.dataset.tone = tone;
}

function refuse(r) {
  say(messageFor(r.code), ['rate_limited', 'unavailable', 'sale_paused', 'network', 'too_early', 'admission_not_open'].includes(r.code) ? 'warn' : 'bad');
}

const jitter = (max) => Math.floor(Math.random() * (max + 1));
const key = (what) => `seckill.${what}.${S.event}.${S.user}`;

// ---- start -----------------------------------------------------------------------------
async function start() {
  const fromPath = location.pathname.split('/').filter(Boolean)[1];
  S.event = fromPath || new URLSearchParams(location.search).get('event');
  $('pick-form').addEventListener('submit', (e) => {
    e.preventDefault();
    location.href = `/shop/${encodeURIComponent($('pick-event').value)}`;
  });
  if (!S.event) {
    $('pick').classList.remove('hidden');
    say(t('shop.choose'));
    return;
  }
  // The provider sends the buyer back here after paying, in the window the checkout opened
  // in: say so and close it; the storefront's own window sees the order paid when it polls.
  if (new URLSearchParams(location.search).get('checkout') === 'done') {
    say(t('shop.paymentReceived'), 'ok');
    $('status').dataset.checkout = 'done';
    setTimeout(() => window.close(), 1500);
    return;
  }
  $('demo-form').addEventListener('submit', demoLogin);
  $('jwt-form').addEventListener('submit', (e) => { e.preventDefault(); signIn($('jwt').value.trim()); });
  $('signout').addEventListener('click', signOut);
  $('reserve').addEventListener('click', reserve);
  $('buy').addEventListener('click', buy);
  $('pay').addEventListener('click', pay);

  await syncClock();
  setInterval(syncClock, 30000);
  if (!(await loadInfo())) return;
  setInterval(loadInfo, INFO_EVERY_MS);
  const demo = await call('GET', '/shop/demo-login');
  const demoOn = !demo.code && demo.body.enabled;
  $('demo-badge').classList.toggle('hidden', !demoOn);
  $('demo-form').classList.toggle('hidden', !demoOn);
  if (!demoOn) $('signin').querySelector('details').open = true;
  const saved = sessionStorage.getItem('seckill.jwt');
  if (saved) signIn(saved, sessionStorage.getItem('seckill.user')); else showSignIn();
  setInterval(tick, 200);
  tick();
}

// A buyer route of this event, with its shard count: each request goes straight to the
// buyer's home shard (without it, the server finds the count itself, one more round trip).
function sale(route) {
  const shards = S.info && S.info.shards ? `?shards=${S.info.shards}` : '';
  return `/api/events/${S.event}/${route}${shards}`;
}

// The event's info, read again every INFO_EVERY_MS for the units left. The route is cacheable
// for a second (and a CDN may serve it a little stale), so the figure may lag a few seconds;
// nothing waits for it: the countdown and the opening follow the server's clock and the
// event's times, which only an operator moves.
const INFO_EVERY_MS = 1000;

async function loadInfo() {
  const r = await call('GET', `/shop/events/${encodeURIComponent(S.event)}`, {cache: 'default'});
  if (r.code) {
    if (!S.info) refuse(r); // later, the info in hand stays good
    return false;
  }
  const first = !S.info;
  S.info = r.body;
  const show = (id, text) => { if ($(id).textContent !== text) $(id).textContent = text; };
  show('window', t('shop.window', {start: dateTime(S.info.start_ms), end: dateTime(S.info.end_ms)}));
  show('left', S.info.sold_out ? t('shop.soldOut') : t('shop.left', {left: S.info.stock_left, stock: S.info.stock}));
  if (!first) return true;
  $('event').classList.remove('hidden');
  $('sku').textContent = S.info.sku;
  if (S.info.unit_amount && S.info.currency) {
    const price = money(S.info.unit_amount, S.info.currency);
    $('price').textContent = t('shop.price', {price});
    $('price').classList.remove('hidden');
    $('pay').textContent = t('shop.pay', {price});
  }
  return true;
}

// ---- sign in (the demo login, or a token from the shop's own login) -----------------
async function demoLogin(e) {
  e.preventDefault();
  const r = await call('POST', '/shop/demo-login', {body: {user: $('user').value.trim()}});
  if (r.code) { refuse(r); return; }
  signIn(r.body.token, r.body.user);
}

function signIn(jwt, user) {
  if (!user) {
    try { user = JSON.parse(atob(jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))).sub; } catch (e) { user = '?'; }
  }
  Object.assign(S, {jwt, user});
  sessionStorage.setItem('seckill.jwt', jwt);
  sessionStorage.setItem('seckill.user', user);
  S.admission = sessionStorage.getItem(key('admission'));
  $('signin').classList.add('hidden');
  $('sale').classList.remove('hidden');
  $('who').textContent = user;
  $('reserved').textContent = S.admission ? t('shop.havePlace') : '';
  say(S.admission ? t('shop.havePlaceStay') : t('shop.signedIn'));
  poll(); // an order from before a reload
}

function signOut() {
  sessionStorage.removeItem('seckill.jwt');
  sessionStorage.removeItem('seckill.user');
  location.reload();
}

function showSignIn() {
  $('signin').classList.remove('hidden');
  say(t('shop.signInToTakePart'));
}

// ---- the countdown -----------------------------------------------------------------------
function tick() {
  if (!S.info || !clock.synced) return;
  const now = serverNow();
  const toStart = S.info.start_ms - now;
  const live = toStart <= 0 && now < S.info.end_ms;
  const el = $('countdown');
  if (toStart > 0) {
    el.textContent = duration(toStart);
    el.setAttribute('aria-label', t('shop.untilStart'));
  } else if (live) {
    el.textContent = t('shop.onSaleNow');
  } else {
    el.textContent = t('shop.saleEnded');
  }
  $('buy').disabled = !(live && S.jwt && S.admission && !S.locked && !S.order && !S.final);
  const opens = S.info.admission_opens_ms || 0;
  $('reserve').disabled = !S.jwt || !!S.admission || S.reserving || now < opens || now >= S.info.end_ms;
  if (S.jwt && !S.admission && !S.final) {
    $('reserved').textContent = now < opens ? t('shop.reservationsOpenIn', {in: duration(opens - now), at: clockTime(opens)})
      : live ? t('shop.noPlaceYet') : '';
  }
  // Precheck as the sale opens (spread over 0-300 ms), so the click finds its token ready.
  if (live && S.admission && !S.purchase && !S.prechecking && !S.order && !S.final && !S.prefetched) {
    S.prefetched = true;
    precheck();
  }
}

// ---- reserve: the admission token, behind a proof of work ---------------------------------
async function reserve() {
  if (S.reserving) return;
  S.reserving = true;
  tick();
  say(t('shop.reserving'));
  const r = await admit().catch(() => ({code: 'worker_failed'}));
  S.reserving = false;
  $('pow').classList.add('hidden');
  tick();
  if (r.status === 202) {
    say(t('shop.lotteryRegistered'), 'ok');
    return;
  }
  if (r.code === 'admission_not_open') {
    S.info.admission_opens_ms = S.info.admission_opens_ms || Math.round(serverNow() + r.retryAfterMs);
    say(t('shop.reservationsOpenAt', {at: clockTime(S.info.admission_opens_ms)}), 'warn');
    return;
  }
  if (r.code) { refuse(r); return; }
  S.admission = r.body.admission_token;
  sessionStorage.setItem(key('admission'), S.admission);
  $('reserved').textContent = t('shop.havePlace');
  say(t('shop.reserved'), 'ok');
  tick();
}

// A challenge, solved, sent with its nonce. A solution refused as stale (expired, used, or the
// event's difficulty was raised) is replaced by a new one; a busy server is asked again later.
async function admit() {
  let solved = null;
  for (let attempt = 0; attempt < 6; attempt++) {
    if (!solved || solved.expires_ms - 5000 < serverNow()) {
      const c = await call('POST', sale('admission/challenge'), {bearer: S.jwt});
      if (c.code) { if (await waited(c, attempt)) continue; return c; }
      solved = {...c.body, nonce: await solve(c.body)};
    }
    const r = await call('POST', sale('admission'), {bearer: S.jwt, body: {challenge: solved.challenge, nonce: solved.nonce}});
    if (['challenge_required', 'bad_challenge', 'challenge_used'].includes(r.code)) solved = null;
    else if (!r.code || !(await waited(r, attempt))) return r;
  }
  return {code: 'unavailable'};
}

// After a "come back later" answer, waits (saying so) and resolves true; false for any other.
async function waited(r, attempt) {
  if (!['rate_limited', 'unavailable', 'network'].includes(r.code)) return false;
  const wait = backOffMs(r, attempt);
  say(t('shop.busy', {seconds: Math.ceil(wait / 1000)}), 'warn');
  await sleep(wait);
  say(t('shop.reserving'));
  return true;
}

// The nonce, found by a Web Worker (millions of hashes would freeze the page), with progress:
// hashes tried against the 2^difficulty expected.
function solve({challenge, difficulty}) {
  if (!difficulty) return Promise.resolve('0');
  const expected = 2 ** difficulty, began = performance.now();
  const progress = (tried) => {
    const rate = tried / Math.max(1, performance.now() - began); // per ms
    $('pow-bar').value = Math.min(tried / expected, 0.99);
    $('pow-note').textContent = tried >= expected ? t('shop.powLonger', {tried})
      : rate ? t('shop.powProgressLeft', {tried, expected, seconds: Math.ceil((expected - tried) / rate / 1000)})
        : t('shop.powProgress', {tried, expected});
  };
  progress(0);
  $('pow').classList.remove('hidden');
  return new Promise((resolve, reject) => {
    const worker = new Worker(document.querySelector('meta[name="pow-worker"]').content);
    worker.onmessage = ({data}) => {
      if (data.nonce === undefined) { progress(data.tried); return; }
      worker.terminate();
      $('pow-bar').value = 1;
      resolve(data.nonce);
    };
    worker.onerror = (e) => { worker.terminate(); reject(e); };
    worker.postMessage({challenge, difficulty});
  });
}

// ---- precheck: the one-time purchase token ---------------------------------------------------
function precheck() {
  S.prechecking = (async () => {
    await sleep(jitter(300));
    for (let attempt = 0; attempt < 4; attempt++) {
      const r = await call('POST', sale('precheck'), {bearer: S.jwt, body: {admission_token: S.admission}});
      if (!r.code) {
        S.purchase = {token: r.body.purchase_token, until: performance.now() + r.body.expires_in_ms - 2000};
        return S.purchase;
      }
      if (r.code === 'already_bought') { S.order = S.order || 'known'; poll(); return null; }
      if (!['too_early', 'rate_limited', 'unavailable', 'network'].includes(r.code)) { refuse(r); return null; }
      await sleep(backOffMs(r, attempt));
    }
    say(messageFor('unavailable'), 'warn');
    return null;
  })();
  return S.prechecking.finally(() => { S.prechecking = null; });
}

// ---- buy: once ----------------------------------------------------------------------------
async function buy() {
  if (S.locked || $('buy').disabled) return; // a synthetic click on the locked button, too
  S.locked = true;               // before any await: a burst of clicks sends one buy
  $('buy').disabled = true;
  say(t('shop.buying'));
  await sleep(jitter(300));      // spread the crowd's clicks over 300 ms
  let p = S.purchase && S.purchase.until > performance.now() ? S.purchase : await (S.prechecking || precheck());
  if (!p) { unlock(); return; }
  S.purchase = null;             // a purchase token is good for one buy
  // A 503 or no answer means the buy was not used (the server was at capacity, or still
  // looking for stock on other shards): the same purchase token is sent again after a
  // back-off, a few times, instead of leaving the buyer to click into the crowd again.
  let r;
  for (let attempt = 0; ; attempt++) {
    r = await call('POST', sale('buy'), {bearer: S.jwt, body: {purchase_token: p.token}});
    if (!['unavailable', 'network'].includes(r.code) || attempt === 3) break;
    const wait = backOffMs(r, attempt);
    say(t('shop.busy', {seconds: Math.ceil(wait / 1000)}), 'warn');
    await sleep(wait);
  }
  if (!r.code) {
    S.order = r.body.order_id;
    showQueue(r.body.position, null);
    say(t('shop.gotIt'), 'ok');
    schedulePoll();
    return;
  }
  refuse(r);
  if (r.code === 'already_bought') { poll(); return; }
  if (['sold_out', 'sale_ended'].includes(r.code)) { finish(); return; }
  if (['rate_limited', 'unavailable', 'network', 'sale_paused'].includes(r.code)) {
    // Refused before it was used: the purchase token stays good for the next click.
    S.purchase = p;
    setTimeout(unlock, backOffMs(r, 0));
    return;
  }
  unlock();
}

function unlock() {
  S.locked = false;
  tick();
}

function finish() {
  S.final = true;
  clearTimeout(S.pollTimer);
  $('queue').classList.add('hidden');
  tick();
}

// ---- waiting: poll every 1-3 s ---------------------------------------------------------------
function showQueue(position, waitMs) {
  $('queue').classList.remove('hidden');
  $('position').textContent = fmt(position);
  $('wait').textContent = waitMs == null ? '…' : waitMs < 1000 ? t('shop.underASecond') : t('shop.about', {duration: duration(waitMs)});
}

function schedulePoll(ms) {
  clearTimeout(S.pollTimer);
  if (!S.final) S.pollTimer = setTimeout(poll, ms || 1000 + jitter(2000));
}

async function poll() {
  if (!S.jwt || S.final) return;
  const r = await call('GET', sale('orders/me'), {bearer: S.jwt});
  if (r.code) {
    if (r.code === 'unauthorized') { say(messageFor(r.code), 'bad'); signOut(); return; }
    if (S.order) { refuse(r); schedulePoll(backOffMs(r, 0)); }
    return;
  }
  const b = r.body;
  if (b.status === 'queued') {
    S.order = b.order_id;
    showQueue(b.position, b.estimated_wait_ms);
    say(t('shop.inLine'), 'ok');
    schedulePoll();
  } else if (b.status === 'order') {
    S.order = b.order_id;
    $('queue').classList.add('hidden');
    if (b.state === 'confirmed') {
      $('pay').classList.remove('hidden');
      if (S.paying) {
        schedulePoll(1000 + jitter(1000)); // the provider tells the shop as soon as it is paid
      } else {
        say(t('shop.confirmed'), 'ok');
        schedulePoll(3000);
      }
    } else if (b.state === 'paid') {
      paid(b.refund);
    } else {
      $('pay').classList.add('hidden');
      say(t('shop.expired') + refundNote(b.refund), 'bad');
      settle(b.refund);
    }
  } else if (b.status === 'sold_out') {
    say(messageFor('sold_out'), 'bad');
    finish();
  } else if (S.order && S.order !== 'known') {
    schedulePoll();
  }
  tick();
}

// Starts the payment (or finds the one under way) and opens the provider's checkout, in the
// page's language, in a window of its own; the order's state, polled, says when the provider
// reported it paid.
async function pay() {
  $('pay').disabled = true;
  const r = await call('POST', `/api/events/${S.event}/orders/${S.order}/pay?locale=${LANG}`, {bearer: S.jwt});
  $('pay').disabled = false;
  if (r.code) {
    refuse(r);
    if (r.code === 'order_expired') { $('pay').classList.add('hidden'); finish(); }
    return;
  }
  const b = r.body;
  if (b.status === 'succeeded') { paid(); return; }
  if (!/^https?:\/\//.test(b.checkout_url || '')) {
    say(t('shop.noPayments'), 'bad');
    return;
  }
  S.paying = true;
  window.open(b.checkout_url, '_blank', 'popup,noopener');
  $('pay').textContent = t('shop.payAgain');
  say(t('shop.completePayment', {before: clockTime(b.deadline_ms)}), 'ok');
  schedulePoll(1500);
}

function paid(refund) {
  $('pay').classList.add('hidden');
  say(t('shop.paid') + refundNote(refund), 'ok');
  settle(refund);
}

// Money paid for the order that it did not need (a second payment, another amount), and
// where its refund stands.
function refundNote(refund) {
  if (!refund) return '';
  const count = refund.payments;
  return refund.state === 'refunded' ? t('shop.refunded', {count}) : t('shop.refunding', {count});
}

// An order past payment is done, unless money it did not need is still being paid back: then
// the page keeps asking, slowly, until it is.
function settle(refund) {
  if (refund && refund.state === 'pending') {
    $('queue').classList.add('hidden');
    schedulePoll(5000 + jitter(5000));
  } else {
    finish();
  }
}

translated.then(start);
