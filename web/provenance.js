// The load profile and provenance as a reader wants them: what was opened, how it was read,
// what was masked and why, the calibration and where each value came from, the time of each
// stage, GPU memory, warnings; the raw JSON stays one click away.
import { fmtNum, fmtBytes, fmtMs, fmtLength, fmtEnergy } from './format.js';

function section(title, rows) {
  const rowsHtml = rows.filter(Boolean).map(([k, v, cls, tip]) =>
    `<tr class="${cls || ''}"${tip ? ` title="${esc(tip)}"` : ''}><th>${esc(k)}</th><td>${esc(String(v))}</td></tr>`).join('');
  return rowsHtml ? `<h4>${esc(title)}</h4><table>${rowsHtml}</table>` : '';
}
const esc = (s) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));

function badPixelRows(p, info) {
  const b = p.bad_pixels;
  if (!p.mask_bad_pixels && !b) return [['bad-pixel masking', 'off: products include every pixel as stored']];
  const rows = [['bad-pixel masking', p.mask_bad_pixels ? 'on: the pixels below are zeroed before every product' : 'off: found, not zeroed']];
  if (info.pixel_mask_bad != null) rows.push(['file pixel mask', `${info.pixel_mask_bad} pixels flagged`]);
  if (b) {
    if (b.rule) rows.push(['rule', b.rule]);
    for (const key of Object.keys(b)) {
      if (key === 'rule') continue;
      const v = b[key];
      const text = Array.isArray(v) ? `${v.length}${v.length ? ': ' + v.slice(0, 8).map((x) => (Array.isArray(x) ? `(${x.join(', ')})` : x)).join(' ') + (v.length > 8 ? ' …' : '') : ''}`
        : (v && typeof v === 'object' ? JSON.stringify(v) : v);
      rows.push([key.replace(/_/g, ' '), text]);
    }
  }
  return rows;
}

function calibrationRows(cal) {
  const src = cal.sources || {};
  const row = (key, label, text) => (text ? [label, text, '', src[key] ? 'from ' + src[key] : ''] : null);
  return [
    row('energy_ev', 'beam energy', cal.energy_ev != null && fmtEnergy(cal.energy_ev)),
    row('wavelength_pm', 'wavelength', cal.wavelength_pm != null && `${fmtNum(cal.wavelength_pm)} pm`),
    row('camera_length_m', 'camera length', cal.camera_length_m != null && fmtLength(cal.camera_length_m)),
    row('detector_distance_m', 'detector distance', cal.detector_distance_m != null && fmtLength(cal.detector_distance_m)),
    row('detector_pixel_size_m', 'detector pixel', cal.detector_pixel_size_m != null && fmtLength(cal.detector_pixel_size_m)),
    row('detector_step', 'detector step', cal.detector_step != null && `${fmtNum(cal.detector_step)} ${cal.detector_units || ''} per pixel`),
    row('scan_step', 'scan step', cal.scan_step != null && `${fmtNum(cal.scan_step)} ${cal.scan_units || ''}`),
    row('convergence_semiangle_mrad', 'convergence semi-angle', cal.convergence_semiangle_mrad != null && `${fmtNum(cal.convergence_semiangle_mrad)} mrad`),
    row('scan_rotation_deg', 'scan rotation', cal.scan_rotation_deg != null && `${fmtNum(cal.scan_rotation_deg)}°`),
  ];
}

// A memory plan in a few words: its kind, the sampling, what it holds and its peak.
function planWords(m) {
  const bin = m.bin > 1 ? `, detector bin ${m.bin}` : '';
  const blocks = m.rows_per_block ? `, ${m.blocks} blocks of ${m.rows_per_block} scan rows` : '';
  const upTo = m.kind === 'compressed' ? 'at most ' : '';
  const held = m.kind === 'cpu' ? 'nothing on the GPU' : `${upTo}${fmtBytes(m.payload_bytes)} held, peak ${fmtBytes(m.peak_bytes)}`;
  return `${m.kind}${bin}${blocks}: ${held}`;
}

// A button per other plan that fits at this bin: the open acquisition is read again along it
// (`memoryPlan`; controls.js binds the clicks).
function planPicks(p) {
  const taken = p.memory_plan && p.memory_plan.kind;
  const others = (p.memory_plans || []).filter((m) => m.fits && m.bin === p.bin && m.kind !== taken);
  if (!others.length) return '';
  const buttons = others.map((m) => `<button type="button" data-plan="${esc(m.kind)}" title="${esc(m.note)}">${esc(m.kind)}</button>`);
  return `<p class="plan-picks">Read it again along another plan: ${buttons.join(' ')}</p>`;
}

export function renderProvenance(el, p, info, fitWarning) {
  const cal = info.calibration || {};
  const stages = (p.stages || []).map((s) => [s.name.startsWith('of which') ? '  ' + s.name : s.name, fmtMs(s.ms), s.name.startsWith('of which') ? 'sub' : '']);
  const html = [
    section('Acquisition', [
      ['files', (info.files || []).map((f) => `${f.name} (${fmtBytes(f.bytes)})`).join(', ')],
      ['format', info.format],
      ['shape', `${info.shape.join(' × ')} (scan rows × cols × detector rows × cols)`],
      ['dtype', info.dtype],
      ['scan shape from', info.scan_shape_source],
      p.scan_crop && ['scan crop', `rows ${p.scan_crop[0]}:${p.scan_crop[1]}, cols ${p.scan_crop[2]}:${p.scan_crop[3]}`],
      ['detector bin', p.bin > 1 ? `${p.bin} × ${p.bin} (count preserving)` : 'none'],
      ['stored / logical size', `${fmtBytes(info.compressed_bytes)} / ${fmtBytes(info.logical_bytes)}`],
      ['source identity (SHA-256)', info.source_sha256, '', 'of the chunk index or of the bytes read'],
    ]),
    section('Bad pixels', badPixelRows(p, info)),
    section('BF disk fit', [fitWarning ? ['warning', fitWarning, 'warn'] : ['fit', 'plausible']]),
    section('Calibration (hover a row for its source)', calibrationRows(cal)),
    section(`Load: ${fmtMs(p.total_ms)} to the first image and its tail`, stages),
    section('GPU memory', [
      ['products run on', { gpu: 'the GPU (exact sums)', 'gpu, compressed': 'the GPU, from a compressed resident (exact sums)', 'gpu, streamed': 'the GPU, streamed from the files for each product (exact sums)' }[p.products_on] || 'the CPU reference'],
      p.compressed && ['compressed resident', `${fmtBytes(p.compressed.packed_bytes)} for ${fmtBytes(p.compressed.raw_bytes)} raw (${p.compressed.ratio.toFixed(2)}×), scratch ${fmtBytes(p.compressed.scratch_bytes)}`, '', 'each 32-byte sector of counts kept at the bit width of its largest sample; kernels decode the sectors they read, and frames read back pass through the scratch'],
      p.memory_budget != null && ['memory budget', fmtBytes(p.memory_budget), '', 'the GPU memory the open was allowed (memoryBudget): the engine takes the fastest exact plan at native sampling within it'],
      p.streamed_ring_sums && ['ring sums', `about (${p.streamed_ring_sums.center.join(', ')}): ${p.streamed_ring_sums.rings} rings, ${fmtBytes(p.streamed_ring_sums.bytes)}`, '',
        `made in one pass after the open${p.streamed_ring_sums.com_moments ? ', with the CoM moments (CoM, DPC and iDPC then need no pass)' : ''}: disks, dark fields and annuli about this centre snap to whole-pixel radii and are summed from them at once; other detectors take one pass over the files`],
      p.memory_plan && ['memory plan', planWords(p.memory_plan), '', p.memory_plan.note],
      ...(p.memory_plans || []).map((m) => [`  ${m.fits ? 'fits' : 'does not fit'}`, planWords(m), m.fits ? '' : 'warn', m.note]),
      p.resident_payload_bytes != null && ['resident payload', fmtBytes(p.resident_payload_bytes), '', 'the acquisition as kept on the GPU: scan × detector × bytes per value'],
      p.resident_peak_bytes != null && ['peak during the load', fmtBytes(p.resident_peak_bytes), '', 'the most GPU memory the load needed at once: the payload plus compressed windows, decode scratch, staging and product buffers, released after the load'],
      p.measured_peak_bytes != null && ['measured peak', fmtBytes(p.measured_peak_bytes), '', "the most GPU memory the device's allocator held during the load, sampled as windows and blocks were uploaded"],
      p.resident_buffers != null && ['resident buffers', p.resident_buffers],
      ['adapter', `${p.adapter && p.adapter.name}${p.adapter && p.adapter.software ? ' (software)' : ''}`],
      p.adapter && p.adapter.masked_sums && ['masked sums meet', p.adapter.masked_sums],
      p.present && ['frames presented', `${p.present.mode} (${p.present.chosen})`],
    ]),
    planPicks(p),
    section('Warnings', (p.warnings || []).map((w) => ['⚠', w, 'warn'])),
  ].join('');
  el.innerHTML = html + '<details class="raw"><summary>raw JSON</summary><pre></pre></details>';
  el.querySelector('pre').textContent = JSON.stringify(p, null, 1);
}
