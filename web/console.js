// The operator console: events (searched, filtered by where their sale stands on the server's
// clock, archived once ended), switches, deny lists, jobs, a live view refreshed every second
// (one GET /admin/events/{id}: a read of the master, then one read-only script per shard) with
// the conditions it flags (conditions.js) beside the action answering each, the payments owing
// a refund (GET /admin/events/{id}/payments?status=refund_due: a Postgres query, so at most every
// REFUNDS_EVERY_MS), the config center (the gray release, shadow mode, the event's
// configuration versions with their diffs and rollback, the global limit across events) and the
// event's latest changes (GET /admin/audit: who, when, which route, before → after), and the
// order events' endpoints (GET /admin/webhooks: the shop's systems its order events are sent to,
// each endpoint's secret shown once when made, its delivery log and replays).
'use strict';

const C = {token: sessionStorage.getItem('seckill.admin') || '', readOnly: false, event: null, events: [], samples: [], timer: 0, offset: 0, refundsAt: 0, refundsBusy: false, refundsAgain: false, health: null, healthAt: 0, filled: null, hooks: [], backlog: {}, hook: null};
const HISTORY = 120; // samples (seconds) kept for the chart
const REFUNDS_EVERY_MS = 5000; // the refunds list is read at most this often by the live view
const REFUNDS_LIMIT = 100;
const HEALTH_EVERY_MS = 5000; // GET /admin/health (a Redis PING and a Postgres query), as often
const VERSIONS_LIMIT = 20;
const LIMITS = ['gray', 'user', 'global']; // the limits shadow mode applies to
const DELIVERIES_LIMIT = 50; // an endpoint's delivery log: its latest attempts shown
const WRITES = ['edit', 'switches', 'global', 'deny', 'ops', 'hook-add', 'hook-replay']; // what changes something: disabled for a viewer

function say(text, tone = '') {
  $('status').textContent = text;
  $('status').dataset.tone = tone;
}

const admin = (method, path, body) => call(method, path, {bearer: C.token, body});

// A write that happened but whose audit record could not be stored says so (the server logs it).
function unrecorded(r) {
  return r.unrecorded ? t('console.unrecorded') : '';
}

// The refusal in words, with the message the API gave.
function problem(r) {
  const message = messageFor(r.code);
  return r.body && r.body.error ? t('console.problem', {message, detail: r.body.error.message}) : message;
}

function failed(r, what) {
  say(t('console.failed', {what, problem: problem(r)}), 'bad');
  if (r.code === 'unauthorized') $('token').focus();
}

async function start() {
  $('auth-form').addEventListener('submit', (e) => { e.preventDefault(); useToken($('token').value.trim()); });
  $('forget').addEventListener('click', () => { sessionStorage.removeItem('seckill.admin'); location.reload(); });
  $('reload-events').addEventListener('click', loadEvents);
  $('event-search').addEventListener('input', renderEvents);
  $('event-filter').addEventListener('change', renderEvents);
  $('edit-form').addEventListener('submit', saveEvent);
  $('warmup').addEventListener('click', () => act('POST', '/warmup', undefined, t('console.done.warmup')));
  $('pause').addEventListener('click', () => act('PATCH', '', {enabled: false}, t('console.done.pause')));
  $('resume').addEventListener('click', () => act('PATCH', '', {enabled: true}, t('console.done.resume')));
  $('user-limit').addEventListener('submit', (e) => { e.preventDefault(); act('PATCH', '', {user_rate: Number($('u-rate').value), user_burst: Number($('u-burst').value)}, t('console.done.userLimit')); });
  $('buy-limit').addEventListener('submit', (e) => { e.preventDefault(); act('PATCH', '', {buy_rate: Number($('b-rate').value), buy_burst: Number($('b-burst').value)}, t('console.done.buyLimit')); });
  $('gray-form').addEventListener('submit', (e) => { e.preventDefault(); act('PATCH', '', {gray_percent: Number($('g-percent').value)}, t('console.done.gray'), t('console.doing.gray')); });
  $('shadow-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const shadow = [...document.querySelectorAll('#shadow-form input:checked')].map((c) => c.value);
    act('PATCH', '', {shadow}, t('console.done.shadow'), t('console.doing.shadow'));
  });
  $('global-form').addEventListener('submit', setGlobalLimit);
  $('reload-versions').addEventListener('click', loadVersions);
  $('extend').addEventListener('submit', (e) => { e.preventDefault(); act('PATCH', '', {end_ms: Math.round(serverNow() + Number($('x-min').value) * 60000)}, t('console.done.extend')); });
  $('deny-form').addEventListener('submit', deny);
  $('draw').addEventListener('click', () => act('POST', '/draw', undefined, t('console.done.draw')));
  document.querySelectorAll('[data-job]').forEach((b) => b.addEventListener('click', () => job(b.dataset.job)));
  $('reload-audit').addEventListener('click', loadAudit);
  $('reload-refunds').addEventListener('click', loadRefunds);
  $('reload-hooks').addEventListener('click', loadHooks);
  $('hook-add-form').addEventListener('submit', addHook);
  $('h-url').addEventListener('input', () => $('h-url').removeAttribute('aria-invalid'));
  $('hook-copy').addEventListener('click', copySecret);
  $('hook-secret-hide').addEventListener('click', () => { hideSecret(); $('h-url').focus(); });
  $('replay-msg').addEventListener('submit', (e) => { e.preventDefault(); replay({msg_id: $('r-msg').value.trim()}); });
  $('replay-range').addEventListener('submit', replayRange);
  $('reload-deliveries').addEventListener('click', loadDeliveries);
  const time = await call('GET', '/api/time');
  if (!time.code) C.offset = time.body.now_ms - Date.now();
  if (C.token) useToken(C.token); else say(t('console.enterToken'));
}

function serverNow() {
  return Date.now() + C.offset;
}

async function useToken(token) {
  C.token = token;
  sessionStorage.setItem('seckill.admin', token);
  const me = await admin('GET', '/admin/whoami');
  if (me.code) { failed(me, t('console.doing.signIn')); return; }
  C.readOnly = me.body.role === 'viewer';
  $('who').textContent = `${me.body.operator} (${me.body.role})`;
  // A viewer's page offers no change the server would refuse (it refuses them whatever the page does).
  for (const id of WRITES) $(id).disabled = C.readOnly;
  $('read-only').classList.toggle('hidden', !C.readOnly);
  if (await loadEvents()) {
    say(C.readOnly ? t('console.signedInViewer') : t('console.signedIn'), 'ok');
    loadGlobalLimit();
    loadHooks();
  }
}

// A button that changes something, disabled for a viewer.
function writeButton(text, label, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  b.setAttribute('aria-label', label);
  b.disabled = C.readOnly;
  b.addEventListener('click', onClick);
  return b;
}

async function loadEvents() {
  const r = await admin('GET', '/admin/events');
  if (r.code) { failed(r, t('console.doing.list')); return false; }
  C.events = r.body.events;
  renderEvents();
  return true;
}

// Where an event's sale stands now, on the server's clock.
function stage(e) {
  if (e.archived) return 'archived';
  if (e.start_ms === undefined) return 'unconfigured';
  const now = serverNow();
  return now < e.start_ms ? 'upcoming' : now < e.end_ms ? 'live' : 'ended';
}

function stageText(e) {
  const now = serverNow();
  switch (stage(e)) {
    case 'upcoming': return t('console.stage.upcoming', {in: duration(e.start_ms - now)});
    case 'live': return t('console.stage.live', {in: duration(e.end_ms - now)});
    case 'ended': return t('console.stage.ended', {at: dateTime(e.end_ms)});
    case 'archived': return t('console.stage.archived');
    default: return t('console.stage.unconfigured');
  }
}

// The events the search and the filter let through: every one but the archived by default.
function renderEvents() {
  const q = $('event-search').value.trim().toLowerCase();
  const filter = $('event-filter').value;
  const shown = C.events.filter((e) => {
    const st = stage(e);
    const wanted = filter === 'current' ? st !== 'archived' : st === filter;
    return wanted && (!q || e.event_id.toLowerCase().includes(q) || (e.sku || '').toLowerCase().includes(q));
  });
  const list = $('event-list');
  list.replaceChildren(...shown.map((e) => {
    const li = document.createElement('li');
    li.dataset.event = e.event_id;
    li.dataset.stage = stage(e);
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'pick';
    b.dataset.id = e.event_id;
    b.textContent = e.event_id;
    b.setAttribute('aria-pressed', String(e.event_id === C.event));
    b.addEventListener('click', () => select(e.event_id));
    const about = document.createElement('span');
    about.className = 'muted';
    about.textContent = `${e.sku || ''} · ${stageText(e)}`;
    li.append(b, about);
    if (e.archived || stage(e) === 'ended') {
      const [verb, label] = e.archived ? [t('console.unarchive'), t('console.unarchiveLabel', {id: e.event_id})]
        : [t('console.archive'), t('console.archiveLabel', {id: e.event_id})];
      li.append(writeButton(verb, label, () => archive(e.event_id, !e.archived)));
    }
    return li;
  }));
  const archived = C.events.filter((e) => e.archived).length;
  $('event-count').textContent = C.events.length
    ? t('console.eventCount', {shown: shown.length, count: C.events.length, archived})
    : t('console.noEvents');
}

// Archives an ended event (it leaves the default list), or brings one back.
async function archive(id, on) {
  const r = await admin(on ? 'POST' : 'DELETE', `/admin/events/${encodeURIComponent(id)}/archive`);
  if (r.code) { failed(r, on ? t('console.doing.archive') : t('console.doing.unarchive')); return; }
  await loadEvents(); // the list moves before the status says so
  say((on ? t('console.archived', {id}) : t('console.unarchived', {id})) + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
  if (id === C.event) loadAudit();
}

function select(id) {
  C.event = id;
  C.samples = [];
  C.healthAt = 0;
  $('f-id').value = id;
  document.querySelectorAll('#event-list button.pick').forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.id === id)));
  $('live').classList.remove('hidden');
  $('live-h').textContent = t('console.liveOf', {id});
  $('refunds').classList.remove('hidden');
  $('refunds-h').textContent = t('console.refundsH');
  $('refunds-note').textContent = t('console.loading');
  delete $('refunds-note').dataset.tone;
  $('refunds-table').classList.add('hidden');
  C.refundsAt = 0;
  C.filled = null;
  clearTimeout(C.timer);
  refresh();
  loadAudit();
  loadVersions();
}

// ---- actions ---------------------------------------------------------------------------------
// A write to the event: `done` says it went, `doing` names it when refused.
async function act(method, suffix, body, done, doing = done) {
  const id = C.event || $('f-id').value;
  if (!id) { say(t('console.pickFirst'), 'warn'); return; }
  const r = await admin(method, `/admin/events/${encodeURIComponent(id)}${suffix}`, body);
  if (r.code) { failed(r, doing); loadAudit(); return; }
  const units = r.body && r.body.stock !== undefined ? t('console.unitsOver', {stock: r.body.stock, shards: r.body.shards}) : '';
  const admitted = r.body && r.body.admitted !== undefined ? t('console.admittedCount', {admitted: r.body.admitted}) : '';
  say(t('console.doneFor', {done, id}) + units + admitted + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
  C.filled = null; // the controls show the configuration as changed
  refresh();
  loadAudit();
  loadVersions();
}

async function saveEvent(e) {
  e.preventDefault();
  const id = $('f-id').value;
  const at = $('f-start-at').value;
  const start = at ? new Date(at).getTime() : Math.round(serverNow() + Number($('f-start-in').value) * 1000);
  const currency = $('f-currency').value.toLowerCase();
  const opens = Number($('f-opens').value);
  const body = {
    sku: $('f-sku').value, stock: Number($('f-stock').value), shards: Number($('f-shards').value),
    start_ms: start, end_ms: start + Number($('f-minutes').value) * 60000,
    admission_mode: $('f-mode').value, admission_multiplier: Number($('f-mult').value), payment_timeout_s: Number($('f-pay').value),
    unit_amount: minorUnits(Number($('f-price').value), currency), currency,
    admission_opens_ms: opens ? Math.round(serverNow() + opens * 1000) : 0,
  };
  if ($('f-pow').value !== '') body.pow_difficulty = Number($('f-pow').value);
  const r = await admin('PUT', `/admin/events/${encodeURIComponent(id)}`, body);
  if (r.code) { failed(r, t('console.doing.save')); return; }
  say((r.body.created ? t('console.created', {id}) : t('console.updated', {id})) + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
  await loadEvents();
  select(id);
}

/** A price (19.99) in the currency's smallest unit (1999). */
function minorUnits(price, currency) {
  let digits = 2;
  try { digits = new Intl.NumberFormat('en', {style: 'currency', currency}).resolvedOptions().maximumFractionDigits; } catch (e) { /* the server refuses the code */ }
  return Math.round(price * 10 ** digits);
}

async function deny(e) {
  e.preventDefault();
  const lines = (id) => $(id).value.split('\n').map((s) => s.trim()).filter(Boolean);
  await act('POST', '/deny', {users: lines('d-users'), addrs: lines('d-addrs')}, t('console.done.deny'));
}

async function job(name) {
  $('job-out').textContent = `${name}…`;
  const r = await admin('POST', `/admin/jobs/${name}`);
  if (r.code) { failed(r, name); $('job-out').textContent = ''; return; }
  $('job-out').textContent = `${name}: ${JSON.stringify(r.body)}`;
  say(t('console.jobDone', {name}), 'ok');
}

// ---- the config center: versions, rollback, the global limit -----------------------------------
/** A version's kind of change, in words. */
function changeKind(change) {
  switch (change) {
    case 'create': return t('console.change.create');
    case 'update': return t('console.change.update');
    case 'switches': return t('console.change.switches');
    case 'rollback': return t('console.change.rollback');
    default: return change;
  }
}

// The selected event's configuration versions, newest first, each with the fields it changed;
// every one but the newest (the configuration in force) can be applied again.
async function loadVersions() {
  const id = C.event;
  if (!id) return;
  const r = await admin('GET', `/admin/events/${encodeURIComponent(id)}/versions?limit=${VERSIONS_LIMIT}`);
  if (id !== C.event) return;
  const list = $('version-list');
  const note = (text) => {
    const li = document.createElement('li');
    li.className = 'muted';
    li.textContent = text;
    list.replaceChildren(li);
  };
  if (r.code) { note(t('console.versionsFailed', {problem: problem(r)})); return; }
  if (!r.body.versions.length) { note(t('console.noVersions')); return; }
  list.replaceChildren(...r.body.versions.map((v, i) => {
    const li = document.createElement('li');
    li.dataset.version = v.version;
    const head = document.createElement('div');
    const title = i === 0 ? t('console.versionInForce', {version: v.version}) : t('console.version', {version: v.version});
    const kind = v.rolled_back_to ? t('console.rolledBackTo', {kind: changeKind(v.change), version: v.rolled_back_to}) : changeKind(v.change);
    head.textContent = [title, dateTime(v.at_ms), v.operator, kind].join(' · ');
    const diff = document.createElement('ul');
    diff.className = 'diff muted';
    const item = (text) => {
      const d = document.createElement('li');
      d.textContent = text;
      return d;
    };
    diff.append(...v.changes.map((c) => {
      const d = item(`${c.field}: ${shown(c.field, c.before)} → ${shown(c.field, c.after)}`);
      d.dataset.field = c.field;
      return d;
    }));
    if (!v.changes.length) diff.append(item(t('console.noFieldChanged')));
    if (v.change === 'create') { // every field: folded
      const all = document.createElement('details');
      const summary = document.createElement('summary');
      summary.textContent = t('console.fieldsSet', {count: v.changes.length});
      all.append(summary, diff);
      li.append(head, all);
    } else {
      li.append(head, diff);
    }
    if (i > 0) {
      li.append(writeButton(t('console.rollBack'), t('console.rollBackLabel', {version: v.version}), () => rollback(v.version)));
    }
    return li;
  }));
}

// A configuration value as a person reads it: instants as dates, lists joined.
function shown(field, v) {
  if (v === null || v === undefined) return '–';
  if (Array.isArray(v)) return v.length ? v.join(', ') : t('console.none');
  if (typeof v === 'number' && field.endsWith('_ms') && v > 1e12) return dateTime(v);
  return String(v);
}

async function rollback(version) {
  if (!confirm(t('console.rollBackConfirm', {version, id: C.event}))) return;
  await act('POST', '/rollback', {version}, t('console.done.rollback', {version}), t('console.doing.rollback', {version}));
}

function globalText(l) {
  return l.rate > 0 ? t('console.globalNow', {rate: l.rate, burst: l.burst}) : t('console.globalOff');
}

async function loadGlobalLimit() {
  const r = await admin('GET', '/admin/limits/global');
  if (r.code) { $('global-now').textContent = t('console.globalFailed', {problem: problem(r)}); return; }
  $('gl-rate').value = r.body.rate;
  $('gl-burst').value = r.body.burst;
  $('global-now').textContent = globalText(r.body);
}

// The answer says over how many shards of how many live events the limit is spread.
async function setGlobalLimit(e) {
  e.preventDefault();
  const r = await admin('PUT', '/admin/limits/global', {rate: Number($('gl-rate').value), burst: Number($('gl-burst').value)});
  if (r.code) { failed(r, t('console.doing.global')); return; }
  const spread = globalText(r.body) + t('console.spread', {shards: r.body.shards, events: r.body.events});
  $('global-now').textContent = spread;
  say(t('console.globalSet', {spread}) + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
}

// ---- the audit: the selected event's latest changes ------------------------------------------
async function loadAudit() {
  if (!C.event) return;
  const r = await admin('GET', `/admin/audit?event=${encodeURIComponent(C.event)}&limit=20`);
  const list = $('audit-list');
  if (r.code) { list.textContent = t('console.auditFailed', {message: messageFor(r.code)}); return; }
  if (!r.body.records.length) { list.textContent = t('console.noChanges'); return; }
  list.replaceChildren(...r.body.records.map((a) => {
    const li = document.createElement('li');
    const head = document.createElement('div');
    head.textContent = `${dateTime(a.at_ms)} · ${a.operator} (${a.role}) · ${a.method} ${a.path} → ${a.status}`;
    const what = document.createElement('div');
    what.className = 'muted';
    what.textContent = change(a.before, a.after);
    li.append(head, what);
    return li;
  }));
}

// What a record changed: the fields that differ (before → after), else what was added or
// returned, or the error answered.
function change(before, after) {
  if (after && after.error) return t('console.refusedCode', {code: after.error.code});
  if (before && after) {
    const diff = Object.keys(after).filter((k) => before[k] !== after[k]).map((k) => `${k}: ${before[k] ?? '–'} → ${after[k]}`);
    return diff.length ? diff.join(', ') : t('console.noFieldChanged');
  }
  return after ? Object.entries(after).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(' ') : v}`).join('  ') : '–';
}

// ---- refunds due: provider payments that paid nothing (late, another amount, a second one) -----
/** Why a payment owes a refund, in words. */
function refundReason(reason) {
  switch (reason) {
    case 'late': return t('console.reason.late');
    case 'amount_mismatch': return t('console.reason.amountMismatch');
    case 'duplicate': return t('console.reason.duplicate');
    default: return reason || '–';
  }
}

/** A table's load failed: `text` in its note, the table hidden. */
function tableFailed(note, table, text) {
  note.textContent = text;
  note.dataset.tone = 'bad';
  table.classList.add('hidden');
}

/** A table row of text cells (`[text, class]` each), with its class and data attributes. */
function textRow(className, data, cells) {
  const tr = document.createElement('tr');
  tr.className = className;
  Object.assign(tr.dataset, data);
  tr.append(...cells.map(([text, cls]) => {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }));
  return tr;
}

// Loads the selected event's payments owing a refund, one call at a time (asked for meanwhile,
// it loads again once the call answers). The live view calls it at most every REFUNDS_EVERY_MS,
// the Reload button whenever pressed.
async function loadRefunds() {
  const id = C.event;
  if (!id) return;
  if (C.refundsBusy) { C.refundsAgain = true; return; }
  C.refundsBusy = true;
  C.refundsAgain = false;
  C.refundsAt = Date.now();
  const r = await admin('GET', `/admin/events/${encodeURIComponent(id)}/payments?status=refund_due&limit=${REFUNDS_LIMIT}`);
  C.refundsBusy = false;
  if (id !== C.event || C.refundsAgain) { loadRefunds(); return; } // another event, or asked again
  const note = $('refunds-note'), table = $('refunds-table');
  if (r.code) {
    $('refunds-h').textContent = t('console.refundsH');
    tableFailed(note, table, t('console.refundsFailed', {problem: problem(r)}));
    return;
  }
  delete note.dataset.tone;
  const due = r.body.payments;
  $('refunds-h').textContent = due.length >= REFUNDS_LIMIT ? t('console.refundsAtLeast', {count: REFUNDS_LIMIT})
    : t('console.refundsCount', {count: due.length});
  if (!due.length) {
    note.textContent = t('console.noRefunds');
    table.classList.add('hidden');
    return;
  }
  note.textContent = due.length >= REFUNDS_LIMIT ? t('console.latestFirst', {count: REFUNDS_LIMIT}) : t('console.newestFirst');
  $('refunds-list').replaceChildren(...due.map((p) => textRow('refund', {payment: p.payment_id}, [
    [p.order_id], [p.user_id], [money(p.amount, p.currency), 'n'],
    [refundReason(p.refund_reason)], [p.provider_ref || '–'],
    [p.confirmed_ms ? dateTime(p.confirmed_ms) : '–'],
    [p.refund_error ? t('console.refundFailed', {error: p.refund_error}) : '–'],
  ])));
  table.classList.remove('hidden');
}

// ---- order events: the shop's endpoints (Standard Webhooks) -----------------------------------
// The list (each endpoint's state, and its last attempt from its log), registration (the secret
// answered once, shown once), the secret's rotation, disable and enable, removal; the selected
// endpoint's delivery log and replays (one message, or a time range).

const hookPath = (id, rest = '') => `/admin/webhooks/${encodeURIComponent(id)}${rest}`;

async function loadHooks() {
  const r = await admin('GET', '/admin/webhooks');
  const note = $('hooks-note'), table = $('hooks-table');
  if (r.code) {
    tableFailed(note, table, t('console.hooksFailed', {problem: problem(r)}));
    return;
  }
  delete note.dataset.tone;
  C.hooks = r.body.endpoints;
  C.backlog = Object.fromEntries(r.body.backlog.map((b) => [b.endpoint_id, b]));
  if (C.hook && !C.hooks.some((h) => h.endpoint_id === C.hook)) closeHook();
  note.textContent = C.hooks.length ? t('console.hooksCount', {count: C.hooks.length}) : t('console.noHooks');
  renderHooks();
  table.classList.toggle('hidden', !C.hooks.length);
  lastDeliveries(C.hooks); // not awaited: one log read per endpoint fills its cell
}

/** Why an endpoint is disabled (`disabled_by`), in words. */
function disabledReason(by) {
  switch (by) {
    case 'operator': return t('console.hookReason.operator');
    case 'gone': return t('console.hookReason.gone');
    case 'failing': return t('console.hookReason.failing');
    default: return '–';
  }
}

/** An endpoint's state: what its deliveries do now. */
function hookState(h) {
  return !h.enabled ? 'disabled' : h.failing_since_ms ? 'failing' : 'active';
}

function hookStateText(h) {
  switch (hookState(h)) {
    case 'disabled': return t('console.hookState.disabled', {at: h.disabled_ms ? dateTime(h.disabled_ms) : '–', reason: disabledReason(h.disabled_by)});
    case 'failing': return t('console.hookState.failing', {since: dateTime(h.failing_since_ms), count: h.attempts, next: dateTime(h.next_attempt_ms)});
    default: return t('console.hookState.active');
  }
}

/** An attempt's answer: its status, or none. */
function answerText(d) {
  return d.status === null || d.status === undefined ? t('console.noAnswer') : t('console.answered', {status: d.status});
}

function renderHooks() {
  $('hooks-list').replaceChildren(...C.hooks.map((h) => {
    const tr = document.createElement('tr');
    tr.className = 'hook';
    tr.dataset.endpoint = h.endpoint_id;
    tr.dataset.state = hookState(h);
    const line = (text, cls) => {
      const d = document.createElement('div');
      d.textContent = text;
      if (cls) d.className = cls;
      return d;
    };
    const where = document.createElement('td');
    where.append(line(h.url, 'url'));
    if (h.description) where.append(line(h.description, 'muted'));
    const state = document.createElement('td');
    state.className = 'state';
    state.append(line(hookStateText(h)));
    if (h.last_error) state.append(line(t('console.hookLastError', {error: h.last_error}), 'muted'));
    const waiting = C.backlog[h.endpoint_id];
    if (waiting && waiting.pending > 0) {
      state.append(line(t('console.hookBacklog', {count: waiting.pending, ago: Math.round(waiting.oldest_ms / 1000)}), 'muted'));
    }
    if (h.previous_secret_until_ms && h.previous_secret_until_ms > serverNow()) {
      state.append(line(t('console.hookOldSecret', {until: dateTime(h.previous_secret_until_ms)}), 'muted'));
    }
    const last = document.createElement('td');
    last.className = 'last';
    last.textContent = t('console.loading');
    const log = document.createElement('button');
    log.type = 'button';
    log.textContent = t('console.hookLog');
    log.setAttribute('aria-label', t('console.hookLogLabel', {url: h.url}));
    log.setAttribute('aria-pressed', String(h.endpoint_id === C.hook));
    log.addEventListener('click', () => openHook(h));
    const buttons = [
      ['log', log],
      ['rotate', writeButton(t('console.hookRotate'), t('console.hookRotateLabel', {url: h.url}), () => rotateHook(h))],
      h.enabled ? ['disable', writeButton(t('console.hookDisable'), t('console.hookDisableLabel', {url: h.url}), () => enableHook(h, false))]
        : ['enable', writeButton(t('console.hookEnable'), t('console.hookEnableLabel', {url: h.url}), () => enableHook(h, true))],
      ['remove', writeButton(t('console.hookRemove'), t('console.hookRemoveLabel', {url: h.url}), () => removeHook(h))],
    ];
    const actions = document.createElement('div');
    actions.className = 'actions';
    actions.append(...buttons.map(([act, b]) => { b.dataset.act = act; return b; }));
    const cell = document.createElement('td');
    cell.append(actions);
    tr.append(where, state, last, cell);
    return tr;
  }));
}

// Each endpoint's last attempt, from its log (the list does not carry it).
async function lastDeliveries(hooks) {
  await Promise.all(hooks.map(async (h) => {
    const r = await admin('GET', hookPath(h.endpoint_id, '/deliveries?limit=1'));
    const cell = document.querySelector(`#hooks-list tr[data-endpoint="${h.endpoint_id}"] td.last`);
    if (!cell) return;
    const d = r.code ? null : r.body.deliveries[0];
    cell.textContent = r.code ? problem(r) : d ? t('console.hookLast', {at: dateTime(d.attempted_ms), answer: answerText(d)}) : t('console.hookNoDelivery');
  }));
}

// A secret is answered once: shown here until the operator hides it, never again.
function showSecret(endpoint, secret, rotated) {
  const {url} = endpoint;
  const until = endpoint.previous_secret_until_ms ? dateTime(endpoint.previous_secret_until_ms) : '–';
  $('hook-secret-note').textContent = rotated ? t('console.hookSecretRotated', {url, until}) : t('console.hookSecretNew', {url});
  const value = $('hook-secret-value');
  value.value = secret;
  $('hook-secret').dataset.endpoint = endpoint.endpoint_id;
  $('hook-secret').classList.remove('hidden');
  value.focus();
  value.select();
}

function hideSecret() {
  $('hook-secret-value').value = '';
  delete $('hook-secret').dataset.endpoint;
  $('hook-secret').classList.add('hidden');
}

async function copySecret() {
  const value = $('hook-secret-value');
  try {
    await navigator.clipboard.writeText(value.value);
    say(t('console.hookCopied'), 'ok');
  } catch (e) { // no clipboard here (or refused): selected, for the keyboard
    value.focus();
    value.select();
    say(t('console.hookCopyByHand'), 'warn');
  }
}

async function addHook(e) {
  e.preventDefault();
  const url = $('h-url').value.trim();
  const r = await admin('POST', '/admin/webhooks', {url, description: $('h-desc').value.trim()});
  if (r.code) {
    failed(r, t('console.doing.hookAdd'));
    if (r.code === 'invalid_endpoint') { $('h-url').setAttribute('aria-invalid', 'true'); $('h-url').focus(); }
    return;
  }
  $('h-url').value = '';
  $('h-desc').value = '';
  await loadHooks();
  say(t('console.hookAdded', {url: r.body.endpoint.url}) + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
  showSecret(r.body.endpoint, r.body.secret, false);
}

// A second rotation within the day retires the secret before the first at once: asked first.
async function rotateHook(h) {
  const until = h.previous_secret_until_ms;
  if (until && until > serverNow() && !confirm(t('console.hookRotateConfirm', {url: h.url, until: dateTime(until)}))) return;
  const r = await admin('POST', hookPath(h.endpoint_id, '/rotate'));
  if (r.code) { failed(r, t('console.doing.hookRotate', {url: h.url})); return; }
  await loadHooks();
  say(t('console.hookRotated', {url: h.url}) + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
  showSecret(r.body.endpoint, r.body.secret, true);
}

async function enableHook(h, on) {
  const r = await admin('POST', hookPath(h.endpoint_id, on ? '/enable' : '/disable'));
  if (r.code) { failed(r, on ? t('console.doing.hookEnable', {url: h.url}) : t('console.doing.hookDisable', {url: h.url})); return; }
  await loadHooks();
  say((on ? t('console.hookEnabled', {url: h.url}) : t('console.hookDisabled', {url: h.url})) + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
  // The button that undoes it takes the focus the pressed one had.
  const undo = document.querySelector(`#hooks-list tr[data-endpoint="${h.endpoint_id}"] button[data-act="${on ? 'disable' : 'enable'}"]`);
  if (undo) undo.focus();
}

async function removeHook(h) {
  if (!confirm(t('console.hookRemoveConfirm', {url: h.url}))) return;
  const r = await admin('DELETE', hookPath(h.endpoint_id));
  if (r.code) { failed(r, t('console.doing.hookRemove', {url: h.url})); return; }
  if ($('hook-secret').dataset.endpoint === h.endpoint_id) hideSecret();
  await loadHooks();
  say(t('console.hookRemoved', {url: h.url}) + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
  $('reload-hooks').focus();
}

/** An instant (Unix ms) as a datetime-local input's value, in this device's time zone. */
function localInput(ms) {
  return new Date(ms - new Date(ms).getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}

// The endpoint's log and replays, below the list; the range starts as the last hour.
function openHook(h) {
  C.hook = h.endpoint_id;
  document.querySelectorAll('#hooks-list button[data-act="log"]').forEach((b) => {
    b.setAttribute('aria-pressed', String(b.closest('tr').dataset.endpoint === h.endpoint_id));
  });
  $('hook').classList.remove('hidden');
  $('hook-h').textContent = t('console.hookLogH', {url: h.url});
  if (!$('r-from').value || !$('r-to').value) {
    const to = Math.ceil(Date.now() / 60000) * 60000;
    $('r-from').value = localInput(to - 3_600_000);
    $('r-to').value = localInput(to);
  }
  $('deliveries-note').textContent = t('console.loading');
  delete $('deliveries-note').dataset.tone;
  $('deliveries-table').classList.add('hidden');
  $('hook-h').focus();
  loadDeliveries();
}

function closeHook() {
  C.hook = null;
  $('hook').classList.add('hidden');
}

async function loadDeliveries() {
  const id = C.hook;
  if (!id) return;
  const r = await admin('GET', hookPath(id, `/deliveries?limit=${DELIVERIES_LIMIT}`));
  if (id !== C.hook) return;
  const note = $('deliveries-note'), table = $('deliveries-table');
  if (r.code) {
    tableFailed(note, table, t('console.deliveriesFailed', {problem: problem(r)}));
    return;
  }
  delete note.dataset.tone;
  const log = r.body.deliveries;
  if (!log.length) {
    note.textContent = t('console.noDeliveries');
    table.classList.add('hidden');
    return;
  }
  note.textContent = log.length >= DELIVERIES_LIMIT ? t('console.latestFirst', {count: DELIVERIES_LIMIT}) : t('console.newestFirst');
  $('deliveries-list').replaceChildren(...log.map((d) => textRow('delivery', {msg: d.msg_id}, [
    [dateTime(d.attempted_ms)], [d.msg_id], [d.type || '–'], [answerText(d)], [d.error || '–'],
    [t('console.deliveryTook', {ms: d.took_ms}), 'n'],
    [d.replay ? t('console.deliveryKind.replay') : t('console.deliveryKind.stream')],
  ])));
  table.classList.remove('hidden');
}

// Sends events to the selected endpoint again: one message or a time range; the answer says
// how many are queued.
async function replay(body) {
  const h = C.hooks.find((x) => x.endpoint_id === C.hook);
  if (!h) return;
  const r = await admin('POST', hookPath(h.endpoint_id, '/replay'), body);
  if (r.code) { failed(r, t('console.doing.replay', {url: h.url})); return; }
  say(t('console.replayQueued', {count: r.body.queued, url: h.url}) + unrecorded(r), r.unrecorded ? 'warn' : 'ok');
}

async function replayRange(e) {
  e.preventDefault();
  const from = new Date($('r-from').value).getTime(), to = new Date($('r-to').value).getTime();
  if (!(from < to)) { say(t('console.replayBackwards'), 'warn'); $('r-to').focus(); return; }
  await replay({from_ms: from, to_ms: to});
}

// ---- the live view ---------------------------------------------------------------------------
async function refresh() {
  clearTimeout(C.timer);
  if (!C.event) return;
  if (!document.hidden) {
    if (Date.now() - C.refundsAt >= REFUNDS_EVERY_MS) loadRefunds(); // not awaited: the tiles go on
    if (Date.now() - C.healthAt >= HEALTH_EVERY_MS) loadHealth();
    const r = await admin('GET', `/admin/events/${encodeURIComponent(C.event)}`);
    if (r.code) failed(r, t('console.doing.status')); else render(r.body);
  }
  C.timer = setTimeout(refresh, 1000);
}

// The health report (503 carries it too, when a dependency fails).
async function loadHealth() {
  C.healthAt = Date.now();
  const r = await admin('GET', '/admin/health');
  C.health = r.body && r.body.redis ? r.body : null;
}

function render(s) {
  const cfg = s.config;
  const stock = Number(cfg.stock || 0);
  const now = performance.now();
  const refused = Object.values(s.refusals).reduce((a, b) => a + b, 0);
  const sample = {t: now, left: s.stock_left, sold: s.sold, queued: s.queued, drained: s.drained, paid: s.paid, dead: s.dead_letters, refused, refusals: s.refusals};
  C.samples.push(sample);
  if (C.samples.length > HISTORY) C.samples.shift();
  // Per-second rates over the last five seconds of samples.
  const since = C.samples.find((x) => now - x.t <= 5500) || C.samples[0];
  const rate = (k) => {
    const dt = (now - since.t) / 1000;
    return dt > 0 ? Math.max(0, Math.round((sample[k] - since[k]) / dt)) : 0;
  };
  const enabled = cfg.enabled !== '0';
  const start = Number(cfg.start_ms), end = Number(cfg.end_ms), at = serverNow();
  const phase = cfg.warmed !== '1' ? t('console.phase.cold') : !enabled ? t('console.phase.paused') : cfg.soldout === '1' ? t('console.phase.soldOut')
    : at < start ? t('console.phase.startsIn', {in: duration(start - at)}) : at < end ? t('console.phase.onSale') : t('console.phase.ended');
  const meta = [cfg.sku];
  if (cfg.currency) meta.push(money(Number(cfg.unit_amount), cfg.currency));
  meta.push(phase, t('console.units', {count: stock}), t('console.shards', {count: s.stock_by_shard.length}),
    cfg.admission_mode === 'lottery' ? t('console.option.lottery') : t('console.option.fcfs'));
  if (cfg.pow_difficulty) meta.push(t('console.powBits', {bits: cfg.pow_difficulty}));
  $('live-meta').textContent = meta.join(' · ');
  const perSecond = (k) => t('console.perSecond', {rate: rate(k)});
  // [the tile's name (its data-name), its value, its note]
  const tiles = [
    ['Sale', t('console.tile.sale'), enabled ? t('console.tile.open') : t('console.tile.paused'), t('console.tile.switch')],
    ['Units left', t('console.tile.left'), s.stock_left, t('console.tile.of', {stock})],
    ['Accepted', t('console.tile.accepted'), s.sold, perSecond('sold')],
    ['Queued', t('console.tile.queued'), s.queued, t('console.tile.forPostgres')],
    ['Drained', t('console.tile.drained'), s.drained, perSecond('drained')],
    ['Paid', t('console.tile.paid'), s.paid, perSecond('paid')],
    ['Expired', t('console.tile.expired'), s.expired, t('console.tile.backOnSale')],
    ['Refused', t('console.tile.refused'), refused, perSecond('refused')],
    ['Dead letters', t('console.tile.dead'), s.dead_letters, s.dead_letters ? t('console.tile.needOperator') : t('console.none')],
    ['Admitted', t('console.tile.admitted'), s.admitted, t('console.tile.registrants', {registrants: s.registrants})],
    ['Stream', t('console.tile.stream'), s.stream_length, t('console.tile.entriesHeld')],
  ];
  $('tiles').replaceChildren(...tiles.map(([id, name, value, note]) => {
    const d = document.createElement('div');
    d.className = 'tile';
    d.dataset.name = id;
    const b = document.createElement('b');
    b.textContent = fmt(value);
    const span = document.createElement('span');
    span.textContent = `${name} · ${note}`;
    d.append(b, span);
    return d;
  }));
  $('pause').disabled = !enabled;
  $('resume').disabled = enabled;
  renderRelease(cfg, s.shadowed || {});
  renderConditions(cfg);
  $('chart').innerHTML = lineChart(C.samples, stock);
  $('shards').innerHTML = barChart(s.stock_by_shard);
  $('refusals').innerHTML = refusalChart(s.refusals, since.refusals || {}, (now - since.t) / 1000);
}

// The gray share and shadow mode as they stand; the controls are filled once per event and
// after each change, so the refresh never overwrites what the operator is typing.
function renderRelease(cfg, shadowed) {
  const gray = cfg.gray_percent ?? '100'; // the default, for an event configured without it
  const shadow = (cfg.shadow || '').split(',').filter(Boolean);
  $('gray-now').textContent = t('console.grayNow', {percent: gray});
  $('shadowed').textContent = t('console.shadowNow', {
    shadow: shadow.length ? shadow.join(', ') : t('console.none'),
    counted: LIMITS.map((l) => `${l} ${fmt(shadowed[l] || 0)}`).join(' · '),
  });
  if (C.filled === C.event) return;
  C.filled = C.event;
  $('g-percent').value = gray;
  document.querySelectorAll('#shadow-form input[name="shadow"]').forEach((c) => { c.checked = shadow.includes(c.value); });
}

// ---- conditions: what the console flags, beside the action that answers each --------------
/** A condition's name in words (the alert's own name where the console has none). */
function conditionName(alert) {
  switch (alert) {
    case 'SeckillQueueBacklog': return t('conditions.name.backlog');
    case 'SeckillLandingFailing': return t('conditions.name.landing');
    case 'SeckillDeadLetters': return t('conditions.name.dead');
    case 'SeckillRedisCpuHigh': return t('conditions.name.redis');
    case 'SeckillShedding': return t('conditions.name.shedding');
    default: return alert;
  }
}

// The controls of this page that answer a condition: [label, CSS selector]. The entry is the
// gray share where the event has one (a control marked data-control="gray_percent"), else the
// pause switch.
function actionsFor(alert, cfg) {
  const grayControl = '[data-control="gray_percent"]';
  const gray = cfg.gray_percent !== undefined && document.querySelector(grayControl);
  const off = [t('conditions.action.entryOff'), '#pause'];
  const entry = gray ? [t('conditions.action.lowerGray', {percent: cfg.gray_percent}), grayControl] : off;
  switch (alert) {
    case 'SeckillQueueBacklog': return gray ? [entry, off] : [entry];
    case 'SeckillLandingFailing': return [off, [t('conditions.action.health'), '#health']];
    case 'SeckillDeadLetters': return [[t('conditions.action.reconcile'), '[data-job="reconcile"]']];
    case 'SeckillRedisCpuHigh': return [off, [t('conditions.action.buyRate'), '#b-rate']];
    default: return [entry];
  }
}

// One row per condition, made once per event (so focus survives the refresh), updated each
// second.
function renderConditions(cfg) {
  const list = $('conditions');
  if (list.dataset.event !== C.event) {
    list.dataset.event = C.event;
    list.replaceChildren(...Object.keys(CONDITIONS).map((alert) => {
      const li = document.createElement('li');
      li.dataset.alert = alert;
      const head = document.createElement('b');
      const detail = document.createElement('span');
      detail.className = 'muted';
      const actions = document.createElement('span');
      actions.className = 'actions';
      actions.append(...actionsFor(alert, cfg).map(([label, selector]) => {
        const b = document.createElement('button');
        b.type = 'button';
        b.textContent = label;
        b.dataset.action = selector;
        b.addEventListener('click', () => {
          if (selector === '#health') loadHealth().then(renderHealth);
          const target = document.querySelector(selector);
          target.scrollIntoView({block: 'center'});
          target.focus();
        });
        return b;
      }));
      li.append(head, detail, actions);
      return li;
    }), healthItem());
  }
  for (const {alert, flagged, detail} of evaluateConditions(C.samples, C.health)) {
    const li = list.querySelector(`[data-alert="${alert}"]`);
    li.dataset.flagged = flagged === null ? 'unknown' : String(flagged);
    const verdict = flagged === null ? t('conditions.unseen') : flagged ? t('conditions.flagged') : t('conditions.ok');
    li.querySelector('b').textContent = `${flagged ? '⚠ ' : ''}${t('conditions.verdict', {name: conditionName(alert), verdict})}`;
    li.querySelector('.muted').textContent = detail;
    const labels = actionsFor(alert, cfg).map(([label]) => label); // the gray % they name moves
    li.querySelectorAll('.actions button').forEach((b, i) => { b.textContent = labels[i]; });
  }
  renderHealth();
}

function healthItem() {
  const li = document.createElement('li');
  const p = document.createElement('span');
  p.id = 'health';
  p.tabIndex = -1;
  p.className = 'muted';
  li.append(p);
  return li;
}

function renderHealth() {
  const h = C.health, el = $('health');
  if (!el) return;
  const probe = (p) => p.ok ? t('console.health.ms', {ms: p.latency_ms})
    : p.error ? t('console.health.failingWith', {error: p.error}) : t('console.health.failing');
  el.textContent = h ? t('console.health', {redis: probe(h.redis), postgres: probe(h.postgres)}) : t('console.health.unread');
}

// Orders (left axis) and refusals (right axis: they can outnumber the units many times).
// [sample field, colour]; each series' name is the catalogue's.
const SERIES = [['left', '#2563eb'], ['sold', '#c2410c'], ['queued', '#0891b2'], ['drained', '#15803d'], ['paid', '#7c3aed']];
const REFUSED = ['refused', '#b91c1c'];

/** A series' name in the chart's legend. */
function seriesName(k) {
  switch (k) {
    case 'left': return t('console.series.left');
    case 'sold': return t('console.series.sold');
    case 'queued': return t('console.series.queued');
    case 'drained': return t('console.series.drained');
    case 'paid': return t('console.series.paid');
    default: return t('console.series.refused');
  }
}

/** Text for the SVG markup the charts build. */
function escapeXml(text) {
  return text.replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'})[c]);
}

function lineChart(samples, stock) {
  const W = 640, H = 196, L = 48, R = 48, B = 22, T = 24;
  const max = Math.max(1, stock, ...samples.map((x) => Math.max(...SERIES.map(([k]) => x[k]))));
  const maxRefused = Math.max(1, ...samples.map((x) => x.refused));
  const now = samples.length ? samples[samples.length - 1].t : 0;
  // The span grows with the history, from 30 s up to two minutes.
  const span = Math.min(HISTORY * 1000, Math.max(30_000, samples.length ? now - samples[0].t : 0));
  const x = (at) => L + (W - L - R) * (1 - Math.min(1, (now - at) / span));
  const y = (v, top) => T + (H - T - B) * (1 - v / top);
  let svg = `<svg viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">`;
  for (const f of [0, 0.5, 1]) {
    svg += `<line x1="${L}" x2="${W - R}" y1="${y(max * f, max)}" y2="${y(max * f, max)}" stroke="currentColor" stroke-opacity=".15"/><text x="${L - 4}" y="${y(max * f, max) + 4}" text-anchor="end">${fmt(Math.round(max * f))}</text>`;
    svg += `<text x="${W - R + 4}" y="${y(maxRefused * f, maxRefused) + 4}" fill="${REFUSED[1]}">${fmt(Math.round(maxRefused * f))}</text>`;
  }
  svg += `<text x="${L}" y="${H - 6}">${escapeXml(t('console.chart.ago', {seconds: Math.round(span / 1000)}))}</text><text x="${W - R}" y="${H - 6}" text-anchor="end">${escapeXml(t('console.chart.now'))}</text>`;
  const line = (k, color, top) => `<polyline fill="none" stroke="${color}" stroke-width="2" data-series="${k}" points="${samples.map((s) => `${x(s.t).toFixed(1)},${y(s[k], top).toFixed(1)}`).join(' ')}"/>`;
  [...SERIES, REFUSED].forEach(([k, color], i) => {
    svg += line(k, color, k === 'refused' ? maxRefused : max);
    svg += `<rect x="${L + 4 + i * 86}" y="4" width="10" height="10" fill="${color}"/><text x="${L + 18 + i * 86}" y="13">${escapeXml(seriesName(k))}</text>`;
  });
  return `${svg}</svg>`;
}

function barChart(shards) {
  const W = 640, H = 90, B = 16, max = Math.max(1, ...shards);
  const w = (W - 8) / Math.max(1, shards.length);
  let svg = `<svg viewBox="0 0 ${W} ${H}" xmlns="http://www.w3.org/2000/svg">`;
  shards.forEach((v, i) => {
    const h = (H - B - 4) * (v / max);
    svg += `<rect x="${4 + i * w + 1}" y="${H - B - h}" width="${Math.max(1, w - 2)}" height="${h}" fill="#2563eb"><title>${escapeXml(t('console.chart.shard', {shard: i, units: v}))}</title></rect>`;
    if (shards.length <= 32) svg += `<text x="${4 + i * w + w / 2}" y="${H - 3}" text-anchor="middle">${v}</text>`;
  });
  return `${svg}</svg>`;
}

// One bar per error code, longest first, with its count and its rate over the last seconds.
function refusalChart(now, before, dt) {
  const rows = Object.entries(now).sort((a, b) => b[1] - a[1]);
  if (!rows.length) return `<p class="muted">${escapeXml(t('console.chart.noneYet'))}</p>`;
  const W = 640, R = 20, L = 150, max = Math.max(1, ...rows.map((r) => r[1]));
  let svg = `<svg viewBox="0 0 ${W} ${rows.length * R + 4}" xmlns="http://www.w3.org/2000/svg">`;
  rows.forEach(([code, n], i) => {
    const per = dt > 0 ? Math.max(0, Math.round((n - (before[code] || 0)) / dt)) : 0;
    const w = (W - L - 170) * (n / max);
    svg += `<g data-code="${code}"><text x="${L - 6}" y="${i * R + 15}" text-anchor="end">${code}</text>`;
    svg += `<rect x="${L}" y="${i * R + 4}" width="${Math.max(1, w)}" height="${R - 6}" fill="#b91c1c"/>`;
    svg += `<text x="${L + w + 6}" y="${i * R + 15}">${fmt(n)} · ${escapeXml(t('console.perSecond', {rate: per}))}</text></g>`;
  });
  return `${svg}</svg>`;
}

translated.then(start);
