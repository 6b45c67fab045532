// The page: panels, controls and the `window.stem4d` automation API. All science runs in the
// Worker's wasm engine; the page only turns user gestures into view states and requests.
// This entry starts the Worker and binds the controls; each concern has its own module.
import { $, state } from './state.js';
import { startWorker } from './worker_client.js';
import { attachCanvases } from './canvases.js';
import { syncEnabled } from './acquisition_view.js';
import { geometryContext } from './detector.js';
import { fitFrames } from './view_geometry.js';
import { buildDisplayControls } from './display_controls.js';
import { bindControls } from './controls.js';
import { buildGeometry, syncGeometry } from './geometry.js';
// Sets `window.stem4d` before main() starts the Worker.
import './stem4d_api.js';

(async function main() {
  startWorker();
  bindControls();
  syncEnabled();
  buildGeometry($('geometry'), geometryContext);
  syncGeometry(geometryContext());
  await state.workerReady;
  if (state.adapterInfo && !state.adapterInfo.error) {
    await attachCanvases();
    buildDisplayControls();
  }
  fitFrames();
  window.dispatchEvent(new Event('stem4d-ready'));
  window.stem4dReady = true;
})();
