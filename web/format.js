// Numbers, sizes and units as the page shows them (readouts, colour bars, provenance).

// Five significant digits, exponent form outside 1e-3..1e5.
export const fmtNum = (v) => {
  if (typeof v === 'bigint') return v.toString();
  if (!Number.isFinite(v)) return String(v);
  return (Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0)) ? v.toExponential(3) : (+v.toPrecision(5)).toString();
};

// Decimal bytes (GB = 10^9), as disks and the README count them.
export function fmtBytes(b) {
  if (b == null || !Number.isFinite(b)) return '—';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (b >= 1000 && i < u.length - 1) { b /= 1000; i++; }
  return b.toFixed(i ? 2 : 0) + ' ' + u[i];
}

export const fmtMs = (ms) => (ms == null ? '—' : ms >= 1000 ? (ms / 1000).toFixed(2) + ' s' : ms.toFixed(ms < 10 ? 2 : 0) + ' ms');

// SI metres in the unit that reads best (m, mm, µm, nm, pm).
export function fmtLength(m) {
  if (m == null || !Number.isFinite(m)) return '—';
  const a = Math.abs(m);
  for (const [k, u] of [[1, 'm'], [1e-3, 'mm'], [1e-6, 'µm'], [1e-9, 'nm'], [1e-12, 'pm']]) {
    if (a >= k || k === 1e-12) return fmtNum(m / k) + ' ' + u;
  }
  return fmtNum(m) + ' m';
}

export function fmtEnergy(ev) {
  if (ev == null || !Number.isFinite(ev)) return '—';
  return ev >= 1e3 ? fmtNum(ev / 1e3) + ' kV' : fmtNum(ev) + ' V';
}

// "Nice" tick values between lo and hi (1, 2, 5 × 10^k steps), about `count` of them.
export function niceTicks(lo, hi, count = 4) {
  if (!(hi > lo) || !Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

// The largest 1-2-5 length not above `target` (scale bars).
export function niceLength(target) {
  if (!(target > 0)) return 0;
  const mag = Math.pow(10, Math.floor(Math.log10(target)));
  return [1, 2, 5, 10].map((k) => k * mag).filter((v) => v <= target).pop() || mag;
}

// The display scales of `common.wgsl`'s `shown` and their inverses (histogram ↔ values).
export const SCALES = {
  linear: [(v) => v, (s) => s],
  log: [(v) => Math.sign(v) * Math.log10(1 + Math.abs(v)), (s) => Math.sign(s) * (Math.pow(10, Math.abs(s)) - 1)],
  sqrt: [(v) => Math.sign(v) * Math.sqrt(Math.abs(v)), (s) => Math.sign(s) * s * s],
};

// Colour-bar ticks between the limits lo..hi, in the panel's units: round values, or decades
// on a log scale that spans them.
export function barTicks(lo, hi, scale, count = 3) {
  if (scale === 'log' && hi > 10 && lo >= 0) {
    let t = [0];
    for (let k = 1; Math.pow(10, k) <= hi; k++) t.push(Math.pow(10, k));
    t = t.filter((v) => v >= lo);
    return t.length > 5 ? t.filter((_, i) => i % Math.ceil(t.length / 5) === 0) : t;
  }
  return niceTicks(lo, hi, count);
}
