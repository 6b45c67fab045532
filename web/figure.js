// A figure for papers and slides: the panel's colour-mapped plane at a chosen width (pixels
// scaled without smoothing, so each scan position or detector pixel stays a sharp square),
// a title, a scale bar on the image, a colour bar with ticks and units (or the colour wheel of
// the CoM direction view), and the acquisition's metadata underneath. Made on a 2D canvas
// from the engine's own PNG of the panel, so the colours are the viewer's.
import { fmtNum, niceLength, SCALES, barTicks } from './format.js';

// `opts`: {png (bytes), width, title, metadata: [lines], stats, units, scale, table (256 RGB),
// wheel (bool), step, stepUnits}. Resolves to a PNG Blob.
export async function composeFigure(opts) {
  const bmp = await createImageBitmap(new Blob([opts.png], { type: 'image/png' }));
  const W = opts.width;
  const k = W / 1200;
  const margin = Math.round(28 * k), barW = Math.round(150 * k), titleH = opts.title ? Math.round(48 * k) : 0;
  const lineH = Math.round(22 * k);
  const imgW = W - 2 * margin - barW;
  const imgH = Math.max(1, Math.round(imgW * bmp.height / bmp.width));
  const H = margin + titleH + imgH + (opts.metadata.length ? margin / 2 + lineH * opts.metadata.length : 0) + margin;
  const canvas = new OffscreenCanvas(W, H);
  const g = canvas.getContext('2d');
  g.fillStyle = 'white'; g.fillRect(0, 0, W, H);
  g.fillStyle = '#111';
  if (opts.title) {
    g.font = `600 ${Math.round(26 * k)}px sans-serif`; g.textBaseline = 'top';
    g.fillText(opts.title, margin, margin, W - 2 * margin);
  }
  const x0 = margin, y0 = margin + titleH;
  g.imageSmoothingEnabled = false;
  g.drawImage(bmp, x0, y0, imgW, imgH);
  if (opts.step) scaleBar(g, x0, y0, imgW, imgH, imgW / bmp.width, opts.step, opts.stepUnits, k);
  const bx = x0 + imgW + Math.round(24 * k);
  if (opts.wheel) wheel(g, bx, y0, k, opts.stats);
  else colourBar(g, bx, y0, Math.round(22 * k), imgH, k, opts);
  g.fillStyle = '#333'; g.font = `${Math.round(15 * k)}px sans-serif`; g.textBaseline = 'top';
  opts.metadata.forEach((line, i) => g.fillText(line, margin, y0 + imgH + margin / 2 + i * lineH, W - 2 * margin));
  return canvas.convertToBlob({ type: 'image/png' });
}

// A white bar with a dark outline at the image's bottom right, about a fifth of its width.
function scaleBar(g, x0, y0, w, h, pxPerSample, step, units, k) {
  const nice = niceLength(w / 5 / pxPerSample * step);
  if (!nice) return;
  const len = nice / step * pxPerSample;
  const m = Math.round(14 * k), t = Math.max(3, Math.round(7 * k));
  const x = x0 + w - m - len, y = y0 + h - m - t;
  g.fillStyle = 'rgba(0,0,0,0.5)';
  g.fillRect(x - 6 * k, y - 26 * k, len + 12 * k, t + 32 * k);
  g.fillStyle = 'white';
  g.fillRect(x, y, len, t);
  g.font = `600 ${Math.round(16 * k)}px sans-serif`; g.textBaseline = 'bottom';
  g.fillText(`${fmtNum(nice)} ${units || ''}`, x, y - 4 * k);
}

// A vertical colour bar (high values at the top) with ticks in the panel's units.
function colourBar(g, x, y, w, h, k, { table, stats, scale, units }) {
  for (let i = 0; i < h; i++) {
    const [r, gg, b] = table[Math.min(255, Math.floor(256 * (h - 1 - i) / h))];
    g.fillStyle = `rgb(${r},${gg},${b})`; g.fillRect(x, y + i, w, 1);
  }
  g.strokeStyle = '#111'; g.lineWidth = Math.max(1, k); g.strokeRect(x, y, w, h);
  const [fwd] = SCALES[scale] || SCALES.linear;
  const lo = fwd(stats.lo), hi = fwd(stats.hi);
  g.fillStyle = '#111'; g.font = `${Math.round(14 * k)}px sans-serif`; g.textBaseline = 'middle';
  for (const v of barTicks(stats.lo, stats.hi, scale, 5)) {
    const yy = y + h - h * (fwd(v) - lo) / ((hi - lo) || 1);
    if (yy < y - 1 || yy > y + h + 1) continue;
    g.fillRect(x + w, yy, 6 * k, Math.max(1, k));
    g.fillText(fmtNum(v), x + w + 9 * k, yy);
  }
  g.save();
  g.translate(x + w + 95 * k, y + h / 2);
  g.rotate(-Math.PI / 2);
  g.textAlign = 'center'; g.textBaseline = 'middle';
  g.fillText(units + (scale !== 'linear' ? ` (${scale} scale)` : ''), 0, 0);
  g.restore();
}

// The direction view's legend: hue = direction (0° along +row, 90° along +col).
function wheel(g, x, y, k, stats) {
  const rad = Math.round(50 * k), cx = x + rad, cy = y + rad;
  for (let a = 0; a < 360; a += 1) {
    const t0 = (a - 0.6) * Math.PI / 180, t1 = (a + 0.6) * Math.PI / 180;
    g.beginPath(); g.moveTo(cx, cy);
    g.arc(cx, cy, rad, Math.PI / 2 - t1, Math.PI / 2 - t0);
    g.closePath(); g.fillStyle = `hsl(${a}, 100%, 50%)`; g.fill();
  }
  g.fillStyle = '#111'; g.font = `${Math.round(13 * k)}px sans-serif`; g.textBaseline = 'top';
  g.fillText('+row', cx - 14 * k, cy + rad + 4 * k);
  g.fillText('+col', cx + rad + 4 * k, cy - 7 * k);
  g.fillText('brightness: |DPC|', x, cy + rad + 24 * k);
  g.fillText(`${fmtNum(stats.lo)} … ${fmtNum(stats.hi)} px`, x, cy + rad + 42 * k);
}
