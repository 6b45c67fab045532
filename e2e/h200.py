#!/usr/bin/env python3
"""Run the in-page suite (e2e/suite.js: parity + bad inputs + interaction benchmark) in a
Chromium that needs no Node: plain CDP over --remote-debugging-pipe, stdlib only. Used on the
H200 machine, where Chromium's WebGPU runs on the real GPU (../shared/setup/chrome-h200/).

    bash .device/chrome/web/launch.sh python3 e2e/h200.py OUT.json [R,C,KR,KC]

Serves dist/, tests/fixtures (as /fixtures/) and e2e/ on 127.0.0.1, launches "$CHROMIUM" with
$CHROMIUM_FLAGS, waits for the page's stem4d-ready, runs runSuite() and writes its result.
With CEILINGS=1 it first measures the File API and GPU upload ceilings on the first LOCAL_FILE
(e2e/ceilings.js; CEILINGS=small: only its small reads, alone and beside large ones). With LOCAL_FILE=PATH[,PATH...] it then opens each file as a user would (a file input, read
by the page's Workers) and times open → first image drawn (issue #4's load target), once per
open-options object of LOCAL_OPTIONS (a JSON list, default [{}]; e.g. {"reads": "blob"} or
{"memoryBudget": 2147483648}); with LOCAL_PASS=1 each open is followed by suite.js's
passOpened (six products in one call: one pass where the open streams), with LOCAL_BENCH=1
by suite.js's benchOpened (the detectors dragged under the plan the open took).
With LOCAL_SYNTHETIC=R,C,KR,KC (the last file holds the synthetic acquisition of that shape,
made by `stem4d bench export-chunks --synthetic … --compressed` and scripts/synthetic_h5.py)
it then checks that the file's products equal, byte for byte, those of the same acquisition
generated on the GPU; a mismatch fails the run. NEED_ADAPTER=TEXT (e.g. nvidia) stops the run
before the suite when the adapter's description does not contain it."""
import functools
import http.server
import json
import os
import select
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MOUNTS = [("/fixtures/", os.path.join(ROOT, "tests/fixtures")), ("/e2e/", os.path.join(ROOT, "e2e")),
          ("/shared/", os.path.join(ROOT, "../shared/data")), ("/", os.path.join(ROOT, "dist"))]


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript"}

    def translate_path(self, path):
        path = path.split("?", 1)[0]
        for prefix, folder in MOUNTS:
            if path.startswith(prefix):
                return os.path.join(folder, path[len(prefix):])
        return os.path.join(ROOT, "dist")

    def log_message(self, *args):
        pass


class Pipe:
    """Chromium's DevTools protocol over fds 3 (commands) and 4 (replies)."""

    def __init__(self, chrome, flags):
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()

        def wire():
            a, b = os.dup(cmd_r), os.dup(res_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = open(os.environ.get("CHROME_LOG", "/tmp/stem4d_chrome.log"), "wb")
        self.proc = subprocess.Popen([chrome, "--remote-debugging-pipe", *flags, "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     close_fds=False, preexec_fn=wire)
        os.close(cmd_r)
        os.close(res_w)
        self.buf, self.next_id, self.events = b"", 0, []

    def send(self, method, params=None, session=None, timeout=30.0):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    return reply
                self.events.append(reply)
            ready, _, _ = select.select([self.res_r], [], [], 0.5)
            if ready:
                chunk = os.read(self.res_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the pipe")
                self.buf += chunk
            if self.proc.poll() is not None:
                raise RuntimeError("Chromium exited with %s" % self.proc.returncode)
        raise TimeoutError(method)

    def evaluate(self, session, expression, timeout=60.0):
        r = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                      session=session, timeout=timeout)
        result = r.get("result", {})
        if "exceptionDetails" in result:
            raise RuntimeError(json.dumps(result["exceptionDetails"])[:2000])
        return result.get("result", {}).get("value")


def open_local_file(chrome, session, path, options):
    """Give `path` to a file input (DevTools DOM.setFileInputFiles, as a user's pick) and time
    stem4d.open(files, options) on it: it resolves once the first image is drawn
    (`first_image_ms`); `settled_ms` also has what the page makes after it (a render
    queued behind that work)."""
    file_input(chrome, session, path)
    return chrome.evaluate(session, """(async () => {
        const files = Array.from(document.getElementById('bench-file').files);
        const t0 = performance.now();
        const info = await window.stem4d.open(files, %s);
        const t1 = performance.now();
        await window.stem4d.rendered();
        const t2 = performance.now();
        return {file: files[0].name, bytes: files[0].size, shape: info.shape,
                first_image_ms: t1 - t0, settled_ms: t2 - t0, options: %s,
                profile: await window.stem4d.profile()};
    })()""" % (json.dumps(options), json.dumps(options)), timeout=600.0)


def bench_opened(chrome, session, shape):
    """e2e/suite.js's benchOpened on the acquisition opened last (LOCAL_BENCH=1): its
    detectors dragged under the memory plan its open took."""
    return chrome.evaluate(session, "import('/e2e/suite.js').then(m => m.benchOpened(%s, %d))"
                           % (json.dumps(shape), int(os.environ.get("LOCAL_BENCH_REPS", "20"))),
                           timeout=600.0)


def same_as_synthetic(chrome, session, dims):
    """The products of the file opened last against those of the synthetic acquisition of
    `dims` ("R,C,KR,KC") generated on the GPU (LOCAL_SYNTHETIC: the file holds that data)."""
    return chrome.evaluate(session, """(async () => {
        const m = await import('/e2e/suite.js');
        const dims = %s;
        const file = await m.digests(dims);
        await window.stem4d.open([], {synthetic: dims});
        const generated = await m.digests(dims);
        const same = Object.keys(file).every((k) => file[k] === generated[k]);
        return {same, file, generated};
    })()""" % json.dumps([int(x) for x in dims.split(",")]), timeout=600.0)


def file_input(chrome, session, path):
    """A hidden file input holding `path`, given as a user's pick (DOM.setFileInputFiles)."""
    chrome.evaluate(session, "(() => { if (document.getElementById('bench-file')) return;"
                             " const i = document.createElement('input'); i.type = 'file';"
                             " i.id = 'bench-file'; i.hidden = true; document.body.appendChild(i); })()")
    root = chrome.send("DOM.getDocument", {}, session=session)["result"]["root"]["nodeId"]
    node = chrome.send("DOM.querySelector", {"nodeId": root, "selector": "#bench-file"},
                       session=session)["result"]["nodeId"]
    chrome.send("DOM.setFileInputFiles", {"files": [path], "nodeId": node}, session=session)


def file_api_ceilings(chrome, session, path):
    """e2e/ceilings.js on `path`: File API read and GPU upload rates, no viewer involved."""
    file_input(chrome, session, path)
    which = "small" if os.environ.get("CEILINGS") == "small" else "all"
    return chrome.evaluate(session, "import('/e2e/ceilings.js').then(m => m.run("
                                    "document.getElementById('bench-file').files[0], '%s'))" % which,
                           timeout=300.0)


def main():
    out_path = sys.argv[1]
    bench = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "512,512,192,192").split(",")]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/" % server.server_address[1]
    flags = os.environ.get("CHROMIUM_FLAGS", "").split()
    chrome = Pipe(os.environ["CHROMIUM"], flags + ["--user-data-dir=/tmp/stem4d-profile-%d" % os.getpid()])
    result = {"url": url, "bench_shape": bench}
    try:
        time.sleep(3)  # let the GPU process settle (the first adapter request can be null)
        target = chrome.send("Target.createTarget", {"url": url})["result"]["targetId"]
        session = chrome.send("Target.attachToTarget", {"targetId": target, "flatten": True})["result"]["sessionId"]
        t0 = time.time()
        while not chrome.evaluate(session, "window.stem4dReady === true") and time.time() - t0 < 60:
            time.sleep(0.5)
        result["adapter"] = chrome.evaluate(session, "window.stem4d.adapter()")
        print("adapter:", json.dumps(result["adapter"]), flush=True)
        need = os.environ.get("NEED_ADAPTER", "").lower()
        if need and need not in json.dumps(result["adapter"]).lower():
            raise RuntimeError("the adapter is not %r (a software fallback?)" % need)
        # Whether Chromium composites on the GPU with these flags (a canvas presented
        # without it goes through a readback): chrome://gpu's feature status.
        gpu = chrome.send("SystemInfo.getInfo").get("result", {}).get("gpu", {})
        result["gpu_features"] = gpu.get("featureStatus")
        print("gpu features:", json.dumps(result["gpu_features"]), flush=True)
        expr = ("import('/e2e/suite.js').then(m => m.runSuite({parts: %s, benchShape: %s, reps: 30}))"
                % (json.dumps(os.environ.get("PARTS", "parity,bad,bench").split(",")), json.dumps(bench)))
        result["suite"] = chrome.evaluate(session, expr, timeout=float(os.environ.get("SUITE_TIMEOUT", "480")))
        if os.environ.get("CEILINGS") in ("1", "small") and os.environ.get("LOCAL_FILE"):
            result["ceilings"] = file_api_ceilings(chrome, session, os.environ["LOCAL_FILE"].split(",")[0])
            for k in ("reads", "uploads"):
                for row in result["ceilings"][k]:
                    print(k[:-1] + ":", json.dumps(row), flush=True)
        result["local_files"] = []
        for path in filter(None, os.environ.get("LOCAL_FILE", "").split(",")):
            for options in json.loads(os.environ.get("LOCAL_OPTIONS", "[{}]")):
                opened = open_local_file(chrome, session, path, options)
                if os.environ.get("LOCAL_PASS"):
                    opened["pass"] = chrome.evaluate(
                        session, "import('/e2e/suite.js').then(m => m.passOpened(%s))"
                        % json.dumps(opened["shape"]), timeout=600.0)
                if os.environ.get("LOCAL_BENCH"):
                    opened["bench"] = bench_opened(chrome, session, opened["shape"])
                result["local_files"].append(opened)
                print("local file:", json.dumps(result["local_files"][-1]), flush=True)
        if os.environ.get("LOCAL_SYNTHETIC") and result["local_files"]:
            result["synthetic_match"] = same_as_synthetic(chrome, session, os.environ["LOCAL_SYNTHETIC"])
            print("synthetic match:", json.dumps(result["synthetic_match"]), flush=True)
    except Exception as e:  # the result file says what failed
        result["error"] = repr(e)
    finally:
        try:
            chrome.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            chrome.proc.wait(5)
        except Exception:
            chrome.proc.kill()
        server.shutdown()
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    suite = result.get("suite") or {}
    print("suite: %s passed, %s failed, skipped %s" % (suite.get("pass"), suite.get("fail"), suite.get("skipped")))
    for f in suite.get("failures", [])[:40]:
        print("FAIL", f)
    print(json.dumps((suite.get("figures") or {}).get("bench"), indent=1))
    if "error" in result:
        print("error:", result["error"])
    same = result.get("synthetic_match", {"same": True}).get("same")
    sys.exit(0 if suite and suite.get("fail") == 0 and "error" not in result and same else 1)


if __name__ == "__main__":
    main()
