// A Worker of e2e/ceilings.js: reads ranges of its File as told and reports the bytes.
let file = null, rs = null;
onmessage = async ({ data: m }) => {
  if (m.file) file = m.file;
  if (m.op === 'ping') return postMessage({ n: 0 });
  if (m.op === 'small') return;
  const f = file;
  let n = 0, b = null;
  try {
    if (m.api === 'sync') { rs = rs || new FileReaderSync(); b = rs.readAsArrayBuffer(f.slice(m.o, m.o + m.l)); n = b.byteLength; }
    else if (m.api === 'blob') { b = await f.slice(m.o, m.o + m.l).arrayBuffer(); n = b.byteLength; }
    else if (m.api === 'stream') {
      const r = f.slice(m.o, m.o + m.l).stream().getReader();
      for (;;) { const { done, value } = await r.read(); if (done) break; n += value.byteLength; }
    }
  } catch (e) { return postMessage({ n: 0, err: String(e) }); }
  if (m.deliver && b) postMessage({ n, b }, [b]); else postMessage({ n });
};
// Many small reads (B-tree nodes): one by one with FileReaderSync, or all in flight.
self.addEventListener('message', async ({ data: m }) => {
  if (m.op !== 'small') return;
  const t0 = performance.now();
  try {
  if (m.api === 'sync') { rs = rs || new FileReaderSync(); for (const o of m.offs) rs.readAsArrayBuffer(file.slice(o, o + m.len)); }
  else if (m.api === 'composite') {
    // `per` ranges a read: one Blob made of their slices, read at once.
    rs = rs || new FileReaderSync();
    for (let i = 0; i < m.offs.length; i += m.per) {
      const b = rs.readAsArrayBuffer(new Blob(m.offs.slice(i, i + m.per).map((o) => file.slice(o, o + m.len))));
      if (b.byteLength !== Math.min(m.per, m.offs.length - i) * m.len) throw new Error('short composite read');
    }
  } else await Promise.all(m.offs.map((o) => file.slice(o, o + m.len).arrayBuffer()));
  } catch (e) { return postMessage({ n: 0, err: String(e) }); }
  postMessage({ n: m.offs.length, ms: performance.now() - t0 });
});
