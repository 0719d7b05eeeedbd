// The admission's proof of work, off the main thread: finds a decimal nonce such that
// SHA-256(challenge + ":" + nonce) starts with `difficulty` zero bits. Posts {tried} about every
// 100 ms, then {nonce, tried}. A small synchronous SHA-256: crypto.subtle.digest is a promise
// per hash, many times slower over the millions of hashes a solve takes.
'use strict';

const K = Int32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = Int32Array.from([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);
const W = new Int32Array(64);

/** One SHA-256 block, the 64 bytes of `view` at `at`, into the state `h`. */
function compress(h, view, at) {
  for (let i = 0; i < 16; i++) W[i] = view.getInt32(at + 4 * i);
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15], y = W[i - 2];
    const s0 = (x >>> 7 | x << 25) ^ (x >>> 18 | x << 14) ^ (x >>> 3);
    const s1 = (y >>> 17 | y << 15) ^ (y >>> 19 | y << 13) ^ (y >>> 10);
    W[i] = W[i - 16] + s0 + W[i - 7] + s1 | 0;
  }
  let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (let i = 0; i < 64; i++) {
    const t1 = k + ((e >>> 6 | e << 26) ^ (e >>> 11 | e << 21) ^ (e >>> 25 | e << 7)) + (e & f ^ ~e & g) + K[i] + W[i] | 0;
    const t2 = ((a >>> 2 | a << 30) ^ (a >>> 13 | a << 19) ^ (a >>> 22 | a << 10)) + (a & b ^ a & c ^ b & c) | 0;
    k = g; g = f; f = e; e = d + t1 | 0; d = c; c = b; b = a; a = t1 + t2 | 0;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

/**
 * SHA-256 of `prefix` + a short ASCII suffix, as a function of the suffix returning the state
 * (8 big-endian words). The whole 64-byte blocks of the prefix are hashed once, here.
 */
function hasher(prefix) {
  const bytes = new TextEncoder().encode(prefix);
  const whole = bytes.length - bytes.length % 64;
  const mid = IV.slice();
  const full = new DataView(bytes.buffer);
  for (let at = 0; at < whole; at += 64) compress(mid, full, at);
  const buf = new Uint8Array(192);
  const view = new DataView(buf.buffer);
  const tail = bytes.length - whole;
  buf.set(bytes.subarray(whole));
  const h = new Int32Array(8);
  let len = -1, end = 0;
  return (suffix) => {
    let p = tail;
    for (let i = 0; i < suffix.length; i++) buf[p++] = suffix.charCodeAt(i);
    if (suffix.length !== len) { // the padding moves only with the suffix's length
      len = suffix.length;
      buf[p++] = 0x80;
      end = (p + 8 + 63) & ~63;
      buf.fill(0, p, end - 4);
      view.setUint32(end - 4, (whole + tail + len) * 8);
    }
    h.set(mid);
    for (let at = 0; at < end; at += 64) compress(h, view, at);
    return h;
  };
}

/** Leading zero bits of a hash state. */
function zeroBits(h) {
  let n = 0;
  for (let i = 0; i < 8 && h[i] === 0; i++) n += 32;
  return n < 256 ? n + Math.clz32(h[n >> 5]) : n;
}

self.onmessage = ({data: {challenge, difficulty}}) => {
  const hash = hasher(`${challenge}:`);
  let next = performance.now() + 100;
  for (let n = 0; ; n++) {
    if (zeroBits(hash(String(n))) >= difficulty) {
      self.postMessage({nonce: String(n), tried: n + 1});
      return;
    }
    if ((n & 0xfff) === 0xfff && performance.now() >= next) {
      next = performance.now() + 100;
      self.postMessage({tried: n + 1});
    }
  }
};
