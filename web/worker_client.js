// The Worker that runs the wasm engine: starting it, requests with their replies (call), and
// the messages it sends unasked (ready, progress).
import { $, state } from './state.js';
import { hideProgress, showError, showProgress } from './messages.js';

let worker = null;
let nextId = 1;
const pending = new Map();

export function startWorker() {
  worker = new Worker('./worker.js', { type: 'module' });
  state.workerReady = new Promise((resolve) => {
    worker.onmessage = (ev) => {
      const m = ev.data;
      if (m.type === 'ready') {
        if (m.error) {
          state.adapterInfo = { error: m.error };
          showError('WebGPU is not available here (' + m.error + '). stem4d needs Chrome or Edge 113+ with a GPU; '
            + 'on Linux start Chrome with --enable-unsafe-webgpu --enable-features=Vulkan, or enable '
            + 'chrome://flags/#enable-unsafe-webgpu, then reload.');
          $('adapter').textContent = 'no WebGPU';
        } else {
          state.adapterInfo = m.adapter;
          state.colormaps = m.colormaps;
          $('adapter').textContent = m.adapter.name + (m.adapter.software ? ' (software adapter: correct, not fast)' : '');
          $('adapter').className = m.adapter.software ? 'muted warn' : 'muted';
        }
        resolve();
      } else if (m.type === 'progress') {
        showProgress(m.stage, m.done, m.total);
      } else if (m.type === 'reply') {
        // Outside a load, progress is a streamed product's: over with its reply.
        if (!state.loading) hideProgress();
        const p = pending.get(m.id);
        pending.delete(m.id);
        if (!p) return;
        if ('error' in m) p.reject(new Error(m.error)); else p.resolve(m.result);
      }
    };
  });
  worker.onerror = (e) => showError('The viewer worker failed: ' + (e.message || e), true);
}

export function call(op, args = {}, transfer = []) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, op, ...args }, transfer);
  });
}

function failPending(why) {
  for (const p of pending.values()) p.reject(new Error(why));
  pending.clear();
}

// The Worker stopped: every request waiting on it fails with `why`.
export function stopWorker(why) {
  if (worker) worker.terminate();
  failPending(why);
}

// Stop the requests sent so far (a streamed product) at their next block; they then fail
// with "cancelled while …". Sent past the queue of requests.
export function cancelWork() {
  if (worker) worker.postMessage({ op: 'cancel', upTo: nextId - 1 });
}

// Calls made so far (the ids handed out).
export const callsMade = () => nextId - 1;
