// The landing page: the sales open now and those coming up (GET /shop/events, their public
// fields only), each linking to its storefront, read again now and then.
'use strict';

// The list is cacheable for seconds: reading it more often would only ask the cache.
const LIST_EVERY_MS = 15000;

// Paths under /shop/ that are routes of their own: a sale with one of these ids opens at
// /shop?event=<id>, which the storefront reads too.
const SHOP_ROUTES = new Set(['events', 'demo-login']);

/** The storefront of sale `id`. */
function shopUrl(id) {
  return SHOP_ROUTES.has(id) ? `/shop?event=${encodeURIComponent(id)}` : `/shop/${encodeURIComponent(id)}`;
}

/** One sale's line: its item as the link, then price and when. Text only, never HTML. */
function item(e) {
  const li = document.createElement('li');
  li.dataset.event = e.event_id;
  const a = document.createElement('a');
  a.href = shopUrl(e.event_id);
  a.textContent = e.sku || e.event_id;
  const when = e.state === 'live'
    ? t('index.until', {time: dateTime(e.end_ms)})
    : t('index.opens', {time: dateTime(e.start_ms)});
  const note = document.createElement('span');
  note.className = 'muted';
  note.textContent = [money(e.unit_amount, e.currency), when, e.sold_out ? t('index.soldOut') : null, t('index.saleId', {id: e.event_id})]
    .filter(Boolean).join(' · ');
  li.append(a, ' ', note);
  return li;
}

function show(list, events) {
  $(`${list}-list`).replaceChildren(...events.map(item));
  $(`${list}-none`).classList.toggle('hidden', events.length > 0);
}

async function load() {
  const r = await call('GET', '/shop/events', {cache: 'default'});
  const el = $('status');
  if (r.code) {
    el.textContent = t('index.loadFailed', {message: messageFor(r.code)});
    el.dataset.tone = 'warn';
    return;
  }
  const live = r.body.events.filter((e) => e.state === 'live');
  const upcoming = r.body.events.filter((e) => e.state !== 'live');
  show('live', live);
  show('upcoming', upcoming);
  const text = t('index.summary', {count: live.length, upcoming: upcoming.length});
  if (el.textContent !== text) el.textContent = text;
  el.dataset.tone = '';
}

translated.then(() => {
  $('status').textContent = t('index.loading');
  load();
  setInterval(load, LIST_EVERY_MS);
});
