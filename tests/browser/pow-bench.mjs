// The admission proof of work, measured: web/pow-worker.js as shipped, checked against SHA-256
// vectors (node:crypto), then solving random challenges in headless Debian chromium, next to a
// bot's baseline (node:crypto's native SHA-256). Prints median and p90 solve times and hashes/s.
// Usage: node pow-bench.mjs [solves per difficulty, default 15] [difficulties, default 16,18,20]
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus, loadavg } from 'node:os';
import vm from 'node:vm';

const SOLVES = Number(process.argv[2] || 15);
const DIFFICULTIES = (process.argv[3] || '16,18,20').split(',').map(Number);
const WORKER = readFileSync(new URL('../../web/pow-worker.js', import.meta.url), 'utf8');
// As functions/web/src/lib.rs sends it: the worker must load under the storefront's policy.
const CSP = "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const sha256 = (s) => createHash('sha256').update(s).digest();
const zeroBits = (d) => { let n = 0; for (const b of d) { if (b) return n + Math.clz32(b) - 24; n += 8; } return n; };
const b64 = (x) => Buffer.from(x).toString('base64url');
/** A challenge shaped as the server's (crates/domain/src/pow.rs), for a user name of random length. */
const challenge = (d) => `c1.${b64(`bench\n${randomBytes(4 + Math.floor(Math.random() * 16)).toString('hex')}\n${Date.now() + 120000}\n${d}\n${randomBytes(16).toString('hex')}`)}.${b64(randomBytes(32))}`;
const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { median: (s[(s.length - 1) >> 1] + s[s.length >> 1]) / 2, p90: q(0.9) };
};

// ---- the worker's SHA-256, in node's V8 --------------------------------------------------------
const posted = [];
const ctx = vm.createContext({ self: { postMessage: (m) => posted.push(m) }, performance, TextEncoder });
vm.runInContext(WORKER, ctx);
const hex = (h) => [...h].map((w) => (w >>> 0).toString(16).padStart(8, '0')).join('');
for (const [msg, want] of [
  ['', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'],
  ['abc', 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'],
  ['abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq', '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1'],
  ['a'.repeat(1000), '41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3'],
]) {
  assert.equal(hex(ctx.hasher(msg)('')), want, `SHA-256 of ${msg.slice(0, 20)}…`);
  assert.equal(hex(ctx.hasher('')(msg.slice(0, 100))), sha256(msg.slice(0, 100)).toString('hex'));
}
for (let len = 0; len < 300; len++) { // every block boundary, prefix and suffix
  const prefix = randomBytes(len).toString('base64url').slice(0, len) + 'é'.repeat(len % 3);
  const hash = ctx.hasher(prefix);
  for (const suffix of ['0', '7', '12345', String(len * 7919), '9'.repeat(20)]) {
    assert.equal(hex(hash(suffix)), sha256(prefix + suffix).toString('hex'), `prefix ${len}, suffix ${suffix}`);
  }
}
ctx.self.onmessage({ data: { challenge: 'c1.test', difficulty: 12 } });
const solved = posted.at(-1);
assert.ok(zeroBits(sha256(`c1.test:${solved.nonce}`)) >= 12 && solved.tried === Number(solved.nonce) + 1);
console.log('worker SHA-256: NIST vectors and 1,500 random prefix/suffix lengths match node:crypto');

/** Hashes per second of `hashOne(i)` over about `ms`. */
function rate(hashOne, ms = 2000) {
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) for (let i = 0; i < 10000; i++) hashOne(n++);
  return n / ((performance.now() - t0) / 1000);
}
const c = `${challenge(20)}:`;
const native = rate((i) => createHash('sha256').update(c + i).digest());
const jsHash = ctx.hasher(c);
const jsInNode = rate((i) => jsHash(String(i)));
// An optimised native SHA-256 (SHA-NI where the CPU has it), as a serious bot would use.
const openssl = /sha256\s+([\d.]+)k/.exec(spawnSync('openssl', ['speed', '-seconds', '2', '-bytes', '64', '-evp', 'sha256'], { encoding: 'utf8' }).stdout || '');
const optimised = openssl ? (Number(openssl[1]) * 1000) / 64 : 0;

// ---- chromium ----------------------------------------------------------------------------------
const server = createServer((req, res) => {
  const worker = req.url === '/pow-worker.js';
  res.writeHead(worker || req.url === '/' ? 200 : 404, {
    'content-type': worker ? 'text/javascript; charset=utf-8' : 'text/html; charset=utf-8',
    'content-security-policy': CSP,
  });
  res.end(worker ? WORKER : '<!doctype html><title>pow bench</title>');
}).listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const browser = await chromium.launch({
  executablePath: process.env.SECKILL_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-background-networking'],
});
const page = await browser.newPage();
const cspErrors = [];
page.on('console', (m) => { if (/Content Security Policy/.test(m.text())) cspErrors.push(m.text()); });
await page.goto(`http://127.0.0.1:${server.address().port}/`);

// crypto.subtle.digest for comparison: one at a time, and 256 in flight.
const subtle = await page.evaluate(async () => {
  const enc = new TextEncoder();
  const run = async (batch) => {
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 2000) {
      await Promise.all(Array.from({ length: batch }, () => crypto.subtle.digest('SHA-256', enc.encode(`c1.example-challenge:${n++}`))));
    }
    return n / ((performance.now() - t0) / 1000);
  };
  return { one: await run(1), batched: await run(256) };
});

/** One solve in a fresh worker, as the storefront does: ms, hashes tried, progress messages. */
const solve = (challenge, difficulty) => page.evaluate(({ challenge, difficulty }) => new Promise((resolve, reject) => {
  const t0 = performance.now();
  const worker = new Worker('/pow-worker.js');
  let progress = 0;
  worker.onerror = (e) => reject(new Error(e.message || 'worker failed'));
  worker.onmessage = ({ data }) => {
    if (data.nonce === undefined) { progress++; return; }
    worker.terminate();
    resolve({ ms: performance.now() - t0, nonce: data.nonce, tried: data.tried, progress });
  };
  worker.postMessage({ challenge, difficulty });
}), { challenge, difficulty });

const rows = [];
for (const d of DIFFICULTIES) {
  const runs = [];
  for (let i = 0; i < SOLVES; i++) {
    const ch = challenge(d);
    const r = await solve(ch, d);
    assert.ok(zeroBits(sha256(`${ch}:${r.nonce}`)) >= d, `nonce ${r.nonce} does not solve ${ch} at ${d}`);
    runs.push(r);
  }
  const ms = runs.map((r) => r.ms), { median, p90 } = stats(ms);
  const hps = runs.reduce((a, r) => a + r.tried, 0) / (ms.reduce((a, b) => a + b, 0) / 1000);
  rows.push({ d, median, p90, hps, tried: stats(runs.map((r) => r.tried)).median, progress: Math.max(...runs.map((r) => r.progress)) });
}
await browser.close();
server.close();
assert.deepEqual(cspErrors, [], 'the worker loads under the storefront CSP');

// ---- report ------------------------------------------------------------------------------------
const M = (x) => `${(x / 1e6).toFixed(2)} M`;
const jsRate = rows.at(-1).hps; // the longest solves: the steadiest rate
console.log(`load average ${loadavg().map((x) => x.toFixed(2)).join(' ')} on ${cpus().length} cores; ${SOLVES} solves per difficulty`);
console.log(`chromium crypto.subtle.digest: ${M(subtle.one)}/s one at a time, ${M(subtle.batched)}/s 256 in flight`);
console.log(`the worker's JS SHA-256 in node: ${M(jsInNode)}/s`);
console.log(`bot baselines, one core: node:crypto createHash ${M(native)}/s${optimised ? `; openssl speed (64-byte messages) ${M(optimised)}/s` : ''}`);
console.log('\n  bits  median   p90      hashes/s   median tried  progress msgs (max)');
for (const r of rows) {
  console.log(`  ${String(r.d).padEnd(5)} ${(r.median / 1000).toFixed(2).padStart(5)} s  ${(r.p90 / 1000).toFixed(2).padStart(5)} s  ${M(r.hps).padStart(8)}/s  ${String(r.tried).padStart(12)}  ${r.progress}`);
}
console.log(`\n  bits  expected hashes  person's median (at ${M(jsRate)}/s)  bot per 1,000 admissions, one core at $0.04/hour`);
for (let d = 14; d <= 24; d += 2) {
  const expected = 2 ** d, bot = (r) => { const s = (expected * 1000) / r; return `${fmtInt(Math.round(s)).padStart(7)} CPU-s = $${(s / 3600 * 0.04).toFixed(4)}`; };
  console.log(`  ${String(d).padEnd(5)} ${fmtInt(expected).padStart(15)}  ${(Math.LN2 * expected / jsRate).toFixed(2).padStart(10)} s${' '.repeat(19)}  node:crypto ${bot(native)}${optimised ? `; openssl ${bot(optimised)}` : ''}`);
}

function fmtInt(n) { return n.toLocaleString('en-US'); }
