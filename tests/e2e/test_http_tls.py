"""The dashboard over TLS (issue 19, docs/BROWSER-WORKERS.md "Secure context (TLS)"): `pool serve --http-tls CERT
KEY` with a self-signed certificate made here by the openssl CLI. Headless Debian chromium opens
https://pool.test/join#... (a name that is not localhost, mapped to the loopback port, the certificate trusted by
its SPKI hash), registers a webgpu device on SwiftShader and completes a matmul job alone. A plain
http://plain.test page (not a secure context: no WebGPU, no WebCrypto) says why it cannot join. Also: the flags'
refusals, a TLS handshake that never finishes closed by the request deadline (measured), and one address holding
unfinished requests or handshakes while clients from other addresses fetch /join (issue 37, finding 5).

Needs `chromium` (apt), node with tests/browser/node_modules (scripts/install-deps) and the openssl CLI; the
browser part is skipped with the reason when they are missing.
"""

import base64
import hashlib
import json
import os
import re
import select
import shutil
import socket
import ssl
import subprocess
import threading
import time
import unittest

from harness import READY_DEADLINE
from test_dashboard import BROWSER_DIR, browser_missing
from test_pool import PoolBase


def make_certificate(folder, name):
    """A P-256 key and a self-signed certificate for `name`; returns (cert, key, base64 SHA-256 of its SPKI)."""
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=" + name,
                    "-addext", "subjectAltName=DNS:" + name], check=True, capture_output=True, timeout=60)
    pem = subprocess.run(["openssl", "x509", "-in", cert, "-pubkey", "-noout"], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    der = base64.b64decode("".join(l for l in pem.splitlines() if not l.startswith("-----")))
    return cert, key, base64.b64encode(hashlib.sha256(der).digest()).decode()


def open_page(url, host_rules, spki, mode, until=None):
    """tls_check.mjs: the JSON lines it printed. In mode secure, once the page has done a task, `until()` runs
    with the page still open (it may keep computing), then the page closes."""
    popen = subprocess.Popen(["node", os.path.join(BROWSER_DIR, "tls_check.mjs"), url, host_rules, spki, mode],
                             cwd=BROWSER_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    lines = []
    try:
        for line in popen.stdout:
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
            if lines[-1]["stage"] in ("done", "failed") and until:
                if lines[-1]["stage"] == "done":
                    until()
                break
    finally:
        rest, err = popen.communicate(timeout=120)  # closes stdin: the page closes
    for line in rest.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            pass
    if not lines:
        raise AssertionError("tls_check.mjs printed nothing: rc=%d stderr=%s" % (popen.returncode, err[-2000:]))
    return lines


def https_get(port, path, source=None):
    """The body of GET path over TLS (the certificate is not checked: it is self-signed), from the loopback address
    `source` if given."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=30,
                                  source_address=(source, 0) if source else None) as raw:
        with context.wrap_socket(raw, server_hostname="pool.test") as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: pool.test\r\nConnection: close\r\n\r\n" % path).encode())
            data = b""
            while True:
                chunk = s.recv(65536)  # the server ends with a close_notify: no SSLEOFError
                if not chunk:
                    break
                data += chunk
    return data.decode("utf-8", "replace")


def get_join(port, tls, source):
    """True when GET /join from the loopback address `source` (127.0.0.0/8 is all loopback on Linux, so the
    dashboard sees each as its own address) is answered with the page."""
    with socket.create_connection(("127.0.0.1", port), timeout=15, source_address=(source, 0)) as raw:
        if tls:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            s = context.wrap_socket(raw, server_hostname="pool.test")
        else:
            s = raw
        s.sendall(("GET /join HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.startswith(b"HTTP/1.1 200") and b"<html" in data


class SlotHolder(threading.Thread):
    """An attacker at the addresses `sources` keeping `count` connections open, each with an unfinished request
    (plain) or the first 3 bytes of a ClientHello (TLS), and reopening every connection the server closes."""

    def __init__(self, port, tls, sources=("127.0.0.2",), count=80):
        super().__init__(daemon=True)
        self.port, self.sources, self.count = port, sources, count
        self.opening = b"\x16\x03\x01" if tls else b"GET /join HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        self.sockets, self.opened = [], 0
        self.stopping = threading.Event()
        self.first_round = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            while len(self.sockets) < self.count and not self.stopping.is_set():
                try:
                    source = self.sources[self.opened % len(self.sources)]
                    s = socket.create_connection(("127.0.0.1", self.port), timeout=5, source_address=(source, 0))
                    s.sendall(self.opening)
                except OSError:
                    break
                self.sockets.append(s)
                self.opened += 1
            self.first_round.set()
            # Closed by the server (refused, evicted or past the deadline): reopened on the next round, 5 a second.
            self.stopping.wait(0.2)
            readable, _, _ = select.select(self.sockets, [], [], 0)
            for s in readable:
                s.close()
                self.sockets.remove(s)
        for s in self.sockets:
            s.close()

    def stop(self):
        self.stopping.set()
        self.join(30)


class HttpTlsTest(PoolBase):
    def setUp(self):
        super().setUp()
        if not shutil.which("openssl"):
            self.skipTest("no openssl CLI")
        self.cert, self.key, self.spki = make_certificate(self.tmp, "pool.test")

    def serve(self, *http_args, name="coordinator"):
        home = self.new_home(name)
        if name == "coordinator":
            self.chome = home  # PoolBase.user() grants credits there
        proc = self.start(home, "pool", "serve", "--json", "--listen", "127.0.0.1:0", *http_args, name=name)
        return proc, proc.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "ready")

    def test_flags_are_refused_clearly(self):
        home = self.new_home("flags")
        self.fails(home, "pool", "serve", "--http-tls", self.cert, self.key, contains=["--http-tls", "--http ADDR"])
        self.fails(home, "pool", "serve", "--http-origin", "https://pool.example.org", contains="--http-origin")
        missing = os.path.join(self.tmp, "missing.pem")
        self.fails(home, "pool", "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-tls", missing,
                   self.key, contains=["missing.pem"])
        self.fails(home, "pool", "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-tls", self.key,
                   self.key, contains=["is not a PEM certificate", self.key])
        other = os.path.join(self.tmp, "other")
        os.mkdir(other)
        _, other_key, _ = make_certificate(other, "other.test")
        self.fails(home, "pool", "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-tls", self.cert,
                   other_key, contains=["is not the key of the certificate"])
        self.fails(home, "pool", "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-origin",
                   "pool.example.org", contains=["--http-origin", "https://HOST"])
        helptext = self.ok(home, "pool", "serve", "--help").stdout
        self.assertIn("--http-tls", helptext)
        self.assertIn("--http-origin", helptext)

    def test_stalled_handshakes_hold_slots_only_until_the_request_deadline(self):
        _, ready = self.serve("--http", "127.0.0.1:0", "--http-tls", self.cert, self.key)
        self.assertRegex(ready["http"], r"^https://127\.0\.0\.1:\d+/$")
        self.assertRegex(ready["browser_join"], r"^https://127\.0\.0\.1:\d+/join#[A-Za-z0-9]+:[A-Za-z0-9]+$")
        port = int(re.search(r":(\d+)/", ready["http"]).group(1))
        self.assertIn("<html", https_get(port, "/join"))
        # 64 clients (the dashboard's connection cap), 16 from each of 4 addresses (the cap per address), send a
        # TLS record header and no more: the server waits for the rest of each ClientHello, and a 17th client
        # from one of those addresses finds no slot.
        stalled = []
        for i in range(64):
            s = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=("127.0.0.%d" % (2 + i % 4), 0))
            s.sendall(b"\x16\x03\x01")
            stalled.append(s)
        start = time.monotonic()
        time.sleep(0.5)
        with self.assertRaises(OSError, msg="a 17th connection from one address was served past its cap"):
            https_get(port, "/join", source="127.0.0.2")
        for s in stalled:
            self.assertEqual(s.recv(1), b"", "a stalled handshake got an answer")
        held = time.monotonic() - start
        for s in stalled:
            s.close()
        print("64 stalled TLS handshakes closed after %.2f s" % held)
        self.assertGreater(held, 8)  # the dashboard's request deadline: 10 s
        self.assertLess(held, 15)
        self.assertIn("<html", https_get(port, "/join"))

    def fetch_join_while_slots_are_held(self, tls, sources=("127.0.0.2",)):
        """The share of 48 GET /join, each from its own address, served while `sources` hold connections."""
        _, ready = self.serve("--http", "127.0.0.1:0", *(["--http-tls", self.cert, self.key] if tls else []))
        port = int(re.search(r":(\d+)/", ready["http"]).group(1))
        self.assertTrue(get_join(port, tls, "127.0.1.1"))
        holder = SlotHolder(port, tls, sources)
        holder.start()
        self.assertTrue(holder.first_round.wait(60), "the attacker could not open its connections")
        time.sleep(0.5)  # the dashboard has accepted them
        served, tries = 0, 48
        try:
            # Spread over more than the 10 s request deadline, so the attacker's reopening is part of it.
            for i in range(tries):
                try:
                    served += get_join(port, tls, "127.0.1.%d" % (i + 2))
                except OSError:
                    pass
                time.sleep(0.25)
        finally:
            holder.stop()
        print("%s: %d of %d GET /join from other addresses served while %s held connections (%d opened)"
              % ("TLS" if tls else "plain HTTP", served, tries, ", ".join(sources), holder.opened))
        def attacker_address_served():
            try:
                return get_join(port, tls, sources[0])
            except OSError:
                return False
        self.poll_until(attacker_address_served, 30, "the attacker's address served again after it left")
        return served / tries

    def test_one_address_holding_unfinished_requests_leaves_room_for_other_addresses(self):
        self.assertGreaterEqual(self.fetch_join_while_slots_are_held(tls=False), 0.95)

    def test_one_address_holding_unfinished_tls_handshakes_leaves_room_for_other_addresses(self):
        self.assertGreaterEqual(self.fetch_join_while_slots_are_held(tls=True), 0.95)

    def test_four_addresses_holding_every_slot_give_way_to_new_addresses(self):
        # 20 connections from each of 4 addresses: 16 each (the cap per address) fill all 64 slots.
        sources = tuple("127.0.0.%d" % i for i in range(2, 6))
        self.assertGreaterEqual(self.fetch_join_while_slots_are_held(tls=False, sources=sources), 0.95)

    def test_browser_joins_over_https_and_a_plain_http_page_says_why_it_cannot(self):
        why = browser_missing()
        if why:
            self.skipTest(why)
        self.coord, self.ready = self.serve("--http", "127.0.0.1:0", "--http-tls", self.cert, self.key)
        port = int(re.search(r":(\d+)/", self.ready["http"]).group(1))
        fragment = self.ready["browser_join"].split("#", 1)[1]
        user = self.user()
        out = os.path.join(self.tmp, "out")
        job = self.start(user, "pool", "submit", self.ready["submit"], "matmul", "--n", "64", "--block", "32", "--seed",
                         "5", "--budget", "20", "--wait", "--json", "--out", out, name="matmul-job")
        finished = []
        lines = open_page("https://pool.test/join#" + fragment, "MAP pool.test 127.0.0.1:%d" % port, self.spki,
                          "secure", until=lambda: finished.append(
                              job.wait_for(lambda e: e.get("event") == "done", 240, "the matmul job")))
        stages = {l["stage"]: l for l in lines}
        self.assertIn("registered", stages, lines)
        reg = stages["registered"]
        self.assertTrue(reg["secure_context"], reg)
        self.assertTrue(reg["device"].endswith("/webgpu"), reg)
        self.assertIn("done", stages, lines)
        print("https page: %s, %s, %d task(s) done" % (reg["device"], reg["backend"], stages["closing"]["done"]))
        self.assertEqual(stages["closing"]["errors"], [], stages["closing"])
        self.assertEqual(len(finished), 1, lines)
        self.assertEqual(finished[0]["state"], "done", finished[0])
        status = self.pool_status(user)
        browsers = [d for d in status["devices"] if d["kind"] == "webgpu"]
        self.assertEqual(len(browsers), 1, status["devices"])
        self.assertGreaterEqual(browsers[0]["valid"], 1)

        # Plain http under a name that is not localhost (--http-origin admits the name): no secure context.
        _, plain = self.serve("--http", "127.0.0.1:0", "--http-origin", "http://plain.test", name="plain")
        plain_port = int(re.search(r":(\d+)/", plain["http"]).group(1))
        lines = open_page("http://plain.test/join#" + plain["browser_join"].split("#", 1)[1],
                          "MAP plain.test 127.0.0.1:%d" % plain_port, "-", "insecure")
        refused = lines[-1]
        print("plain http page: %r" % refused["error"])
        self.assertEqual(refused["stage"], "refused", lines)
        self.assertFalse(refused["secure_context"], refused)
        self.assertFalse(refused["has_subtle"], refused)
        self.assertIn("open this page over https or on localhost", refused["error"].lower(), refused)
        self.assertIn("WebCrypto", refused["error"])
        self.assertIn("secure context", refused["backend"])


if __name__ == "__main__":
    unittest.main()
