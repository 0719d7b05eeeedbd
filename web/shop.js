// The storefront: sign in, reserve, count down on the server's clock, buy once, wait, pay.
'use strict';

const S = {
  event: null, info: null, jwt: null, user: null,
  admission: null,        // admission token
  purchase: null,         // {token, until} (until: performance.now() deadline)
  prechecking: null,      // the precheck in flight (a promise)
  locked: false,          // the buy button, once clicked
  order: null,            // order id once bought
  final: false,           // a final result is shown: no more polling
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
  say(messageFor(r.code), ['rate_limited', 'unavailable', 'sale_paused', 'network', 'too_early'].includes(r.code) ? 'warn' : 'bad');
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
    say('Choose a sale.');
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

async function loadInfo() {
  const r = await call('GET', `/shop/events/${encodeURIComponent(S.event)}`);
  if (r.code) { refuse(r); return false; }
  S.info = r.body;
  $('event').classList.remove('hidden');
  $('sku').textContent = S.info.sku;
  const t = (ms) => new Date(ms).toLocaleString();
  $('window').textContent = `On sale ${t(S.info.start_ms)} – ${t(S.info.end_ms)}`;
  $('left').textContent = S.info.sold_out ? 'Sold out' : `${fmt(S.info.stock_left)} of ${fmt(S.info.stock)} left`;
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
  $('reserved').textContent = S.admission ? 'You have a place: the buy button works from the start of the sale.' : '';
  say(S.admission ? 'You have a place. Stay on this page.' : 'Signed in. Reserve a place before the sale starts.');
  poll(); // an order from before a reload
}

function signOut() {
  sessionStorage.removeItem('seckill.jwt');
  sessionStorage.removeItem('seckill.user');
  location.reload();
}

function showSignIn() {
  $('signin').classList.remove('hidden');
  say('Sign in to take part.');
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
    el.setAttribute('aria-label', 'Time until the sale starts');
  } else if (live) {
    el.textContent = 'On sale now';
  } else {
    el.textContent = 'Sale ended';
  }
  $('buy').disabled = !(live && S.jwt && S.admission && !S.locked && !S.order && !S.final);
  $('reserve').disabled = !S.jwt || !!S.admission || now >= S.info.end_ms;
  if (live && S.jwt && !S.admission && !S.final) $('reserved').textContent = 'No place reserved yet: reserve now, places may be left.';
  // Precheck as the sale opens (spread over 0-300 ms), so the click finds its token ready.
  if (live && S.admission && !S.purchase && !S.prechecking && !S.order && !S.final && !S.prefetched) {
    S.prefetched = true;
    precheck();
  }
}

// ---- reserve: the admission token ----------------------------------------------------------
async function reserve() {
  $('reserve').disabled = true;
  const r = await call('POST', sale('admission'), {bearer: S.jwt});
  if (r.status === 202) {
    say('You are registered for the lottery. Come back after the draw and press reserve again.', 'ok');
    $('reserve').disabled = false;
    return;
  }
  if (r.code) { refuse(r); $('reserve').disabled = false; return; }
  S.admission = r.body.admission_token;
  sessionStorage.setItem(key('admission'), S.admission);
  $('reserved').textContent = 'You have a place: the buy button works from the start of the sale.';
  say('Reserved! Stay on this page: the buy button unlocks when the sale starts.', 'ok');
  tick();
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
  say('Buying…');
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
    say(`Busy: trying again in ${Math.ceil(wait / 1000)} s…`, 'warn');
    await sleep(wait);
  }
  if (!r.code) {
    S.order = r.body.order_id;
    showQueue(r.body.position, null);
    say('Got it! Your item is reserved; your order is being recorded.', 'ok');
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
  $('wait').textContent = waitMs == null ? '…' : waitMs < 1000 ? 'under a second' : `about ${duration(waitMs)}`;
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
    say('You are in line: your item is reserved while your order is recorded.', 'ok');
    schedulePoll();
  } else if (b.status === 'order') {
    S.order = b.order_id;
    $('queue').classList.add('hidden');
    if (b.state === 'confirmed') {
      $('pay').classList.remove('hidden');
      say('Confirmed! Pay now to keep your item.', 'ok');
      schedulePoll(3000);
    } else if (b.state === 'paid') {
      $('pay').classList.add('hidden');
      say('Paid. Thank you — your item is on its way.', 'ok');
      finish();
    } else {
      $('pay').classList.add('hidden');
      say('Your order expired: the payment window closed and the item went back on sale.', 'bad');
      finish();
    }
  } else if (b.status === 'sold_out') {
    say(messageFor('sold_out'), 'bad');
    finish();
  } else if (S.order && S.order !== 'known') {
    schedulePoll();
  }
  tick();
}

async function pay() {
  $('pay').disabled = true;
  const r = await call('POST', `/api/events/${S.event}/orders/${S.order}/pay`, {bearer: S.jwt});
  $('pay').disabled = false;
  if (r.code) {
    refuse(r);
    if (r.code === 'order_expired') { $('pay').classList.add('hidden'); finish(); }
    return;
  }
  $('pay').classList.add('hidden');
  say('Paid. Thank you — your item is on its way.', 'ok');
  finish();
}

start();
