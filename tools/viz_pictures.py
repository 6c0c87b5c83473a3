"""Regenerate the pictures of docs/visualization.md and docs/tensorboard.md.

    PYTHONPATH=. python tools/viz_pictures.py [--no-tensorboard]

- docs/viz_draw_module.png: ``draw_module`` of the demo's CNN;
- docs/viz_make_dot.png: ``make_dot`` of a small MLP's squared error (Linear, ReLU,
  Linear);
- docs/tensorboard_graph.png: TensorBoard's graph tab showing the demo MLP's
  ``add_graph``, with the model's frame opened: a TensorBoard server on localhost and a
  headless Chromium driven over the DevTools protocol (needs the ``tensorboard`` package
  and Debian's ``chromium``).

Needs Graphviz's ``dot``. A docs step, not a test: look at the pictures afterwards.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import ember
from ember.examples.mnist import build_model
from ember.viz import draw_module, make_dot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")


def graphviz_pictures():
    """The two Graphviz pictures."""
    ember.manual_seed(0)
    draw_module(build_model("cnn", 8, 8), ember.randn(1, 1, 8, 8)).render(
        os.path.join(DOCS, "viz_draw_module"), format="png", cleanup=True)
    mlp = ember.nn.Sequential(ember.nn.Linear(4, 3), ember.nn.ReLU(), ember.nn.Linear(3, 1))
    loss = ((mlp(ember.randn(5, 4)) - ember.zeros(5, 1)) ** 2).mean()
    make_dot(loss, params=dict(mlp.named_parameters())).render(
        os.path.join(DOCS, "viz_make_dot"), format="png", cleanup=True)


# ----- a headless Chromium driven over the DevTools protocol ----------------------------
class _DevTools:
    """The DevTools protocol over a WebSocket (RFC 6455 text frames), in the standard
    library: enough to evaluate JavaScript in a page and take a screenshot."""

    def __init__(self, ws_url):
        host, _, path = ws_url[len("ws://"):].partition("/")
        h, p = host.split(":")
        self.sock = socket.create_connection((h, int(p)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            reply += chunk
        if b" 101 " not in reply.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the WebSocket: {reply[:200]!r}")
        self.next_id = 0

    def _send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("DevTools closed the connection")
            buf += chunk
        return buf

    def _receive(self):
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            payload = self._exact(n)
            message += payload
            if b0 & 0x80:
                return message.decode()

    def call(self, method, **params):
        """Send one command and return its result (events on the way are dropped)."""
        self.next_id += 1
        self._send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self._receive())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"DevTools {method}: {reply['error']}")
                return reply["result"]


# find TensorBoard's graph element inside the shadow roots, wait until it has drawn the
# graph, then open the model's frame (the event a double click on it sends) and fit the
# picture to the window
_OPEN_FRAME = """
(async () => {
  const all = (root, out = []) => {
    for (const el of root.querySelectorAll('*')) {
      out.push(el);
      if (el.shadowRoot) all(el.shadowRoot, out);
    }
    return out;
  };
  for (let i = 0; i < 150; i++) {
    const graph = all(document).find(el => el.tagName === 'TF-GRAPH');
    const drawn = graph && all(graph.shadowRoot || graph).some(
      el => el.classList && el.classList.contains('node'));
    if (drawn) {
      graph.dispatchEvent(new CustomEvent('node-toggle-expand',
                                          {detail: {name: %(frame)s}}));
      await new Promise(r => setTimeout(r, 2000));
      // no selection card, no minimap: the graph alone, fitted to the window
      const find = tag => all(document).find(el => el.tagName === tag);
      const board = find('TF-GRAPH-BOARD');
      if (board) board.selectedNode = null;
      const minimap = find('TF-GRAPH-MINIMAP');
      if (minimap) minimap.style.display = 'none';
      const scene = find('TF-GRAPH-SCENE');
      for (let j = 0; j < 2; j++) {  // again once the opened frame is laid out
        if (scene && scene.fit) scene.fit();
        await new Promise(r => setTimeout(r, 1500));
      }
      return 'opened';
    }
    await new Promise(r => setTimeout(r, 200));
  }
  return 'no graph';
})()
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url, seconds):
    end = time.time() + seconds
    while time.time() < end:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read()
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"nothing answered at {url} within {seconds} s")


def tensorboard_graph_picture(out=None):
    """TensorBoard's graph tab for the demo MLP, screenshot by headless Chromium (to
    ``out``, by default docs/tensorboard_graph.png)."""
    out = out or os.path.join(DOCS, "tensorboard_graph.png")
    from ember.utils.tensorboard import SummaryWriter
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install chromium)")
    tmp = tempfile.mkdtemp(prefix="viz-pictures-")
    ember.manual_seed(0)
    with SummaryWriter(os.path.join(tmp, "logs", "demo-mlp")) as w:
        w.add_graph(build_model("mlp", 8, 8), ember.randn(1, 1, 8, 8))
    tb_port, cdp_port = _free_port(), _free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", os.path.join(tmp, "logs"),
             "--host", "127.0.0.1", "--port", str(tb_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_http(f"http://127.0.0.1:{tb_port}/data/runs", 60)
        procs.append(subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync",
             f"--user-data-dir={os.path.join(tmp, 'chromium')}", "--window-size=1200,1000",
             f"--remote-debugging-port={cdp_port}", "--remote-allow-origins=*",
             f"http://127.0.0.1:{tb_port}/#graphs"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_http(f"http://127.0.0.1:{cdp_port}/json/version", 60)
        pages = [t for t in json.loads(_wait_http(f"http://127.0.0.1:{cdp_port}/json/list", 30))
                 if t.get("type") == "page"]
        dev = _DevTools(pages[0]["webSocketDebuggerUrl"])
        # the screenshot's size is the page's viewport, whatever the window around it
        dev.call("Emulation.setDeviceMetricsOverride", width=1200, height=1000,
                 deviceScaleFactor=1, mobile=False)
        for _ in range(10):  # the page may still be loading (a new execution context)
            try:
                state = dev.call("Runtime.evaluate", expression=_OPEN_FRAME % {
                    "frame": json.dumps("Sequential")}, awaitPromise=True,
                    returnByValue=True)
                break
            except RuntimeError as e:
                if "context" not in str(e):
                    raise
                time.sleep(1)
        if state["result"].get("value") != "opened":
            raise RuntimeError(f"TensorBoard's graph did not appear: {state}")
        shot = dev.call("Page.captureScreenshot", format="png")
        with open(out, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    """Write every picture (``--no-tensorboard``: the Graphviz ones only)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--no-tensorboard", action="store_true")
    args = ap.parse_args()
    graphviz_pictures()
    if not args.no_tensorboard:
        tensorboard_graph_picture()


if __name__ == "__main__":
    main()
