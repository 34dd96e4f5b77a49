#!/usr/bin/env python3
"""Fault tests for a real `runsnack rendezvous` process on 127.0.0.1.

Each test abuses the server with the real wire format (rdv_codec.hpp: u32
big-endian length + one JSON object) and then checks that it is still
responsive -- a real `runsnack share --rendezvous` provider still gets
introduced to a consumer and its relay side is spliced -- and that its
resident memory stayed bounded. Faults: floods of introductions for unknown
links, half-open connections, oversized and malformed messages, a relay side
that never reads, a third party joining a spliced pair, a relay side that
talks before its pair is matched.

Run: RUNSNACK_BIN=build/dev/src/cli/runsnack python3 -m unittest -v test_rdv_faults
"""
import json, os, random, select, shutil, socket, struct, subprocess, sys, tempfile, time, unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("RUNSNACK_BIN") or os.path.join(REPO, "build", "dev", "src", "cli", "runsnack")
B32 = "abcdefghijklmnopqrstuvwxyz234567"
RSS_GROWTH_LIMIT = 64 * 1024 * 1024  # generous: the ASan build's allocator keeps freed memory a while


def rand_id(n):
    return "".join(random.choice(B32) for _ in range(n))


def frame(obj):
    body = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    return struct.pack("!I", len(body)) + body


def recv_exact(s, n, deadline):
    out = b""
    while len(out) < n:
        s.settimeout(max(0.01, deadline - time.time()))
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def read_msg(s, timeout=5.0):
    deadline = time.time() + timeout
    (n,) = struct.unpack("!I", recv_exact(s, 4, deadline))
    return json.loads(recv_exact(s, n, deadline))


def closed_within(s, timeout):
    """True when the server closes `s` (EOF or reset) within `timeout`, reading and dropping what comes."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        s.settimeout(max(0.01, deadline - time.time()))
        try:
            if not s.recv(65536):
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False


class RendezvousFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(BIN):
            raise unittest.SkipTest(f"runsnack binary not found at {BIN}")
        cls.tmp = tempfile.mkdtemp(prefix="rdv-faults-")
        cls.procs = []
        env = dict(os.environ, RUNSNACK_HOME=os.path.join(cls.tmp, "rdv"), RUNSNACK_LOG="warn")
        cls.rdv = subprocess.Popen([BIN, "rendezvous", "--listen", "127.0.0.1:0", "--json"], env=env,
                                   stdout=subprocess.PIPE, stderr=open(os.path.join(cls.tmp, "rdv.log"), "ab"),
                                   text=True)
        cls.procs.append(cls.rdv)
        ready = json.loads(cls.rdv.stdout.readline())
        host, port = ready["listen"].rsplit(":", 1)
        cls.addr = ("127.0.0.1", int(port))
        # A real provider registered with this rendezvous.
        home = os.path.join(cls.tmp, "provider")
        os.makedirs(home)
        env = dict(os.environ, RUNSNACK_HOME=home, RUNSNACK_LOG="warn")
        cls.provider = subprocess.Popen(
            [BIN, "share", "--json", "--no-qr", "--no-port-mapping", "--listen", "127.0.0.1:0", "--rendezvous",
             f"127.0.0.1:{port}"], env=env, stdout=subprocess.PIPE,
            stderr=open(os.path.join(cls.tmp, "provider.log"), "ab"), text=True)
        cls.procs.append(cls.provider)
        first = json.loads(cls.provider.stdout.readline())
        cls.peer, cls.grant = first["peer"], first["grant"]
        deadline = time.time() + 15
        while time.time() < deadline:
            ev = json.loads(cls.provider.stdout.readline())
            if ev.get("event") == "rendezvous" and ev["state"].startswith("registered"):
                break
        else:
            raise RuntimeError("provider never registered")

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- helpers ----
    def conn(self):
        s = socket.create_connection(self.addr, timeout=5)
        self.addCleanup(s.close)
        return s

    def rss(self):
        with open(f"/proc/{self.rdv.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def introduce(self, peer=None, grant=None):
        """Connect as a consumer; answer the RTT ping; return the intro."""
        s = self.conn()
        s.sendall(frame({"t": "connect", "peer": peer or self.peer, "grant": grant or self.grant, "candidates": []}))
        while True:
            m = read_msg(s)
            if m["t"] == "ping":
                s.sendall(frame({"t": "pong", "n": m["n"]}))
            else:
                return s, m

    def relay(self, token, side):
        s = self.conn()
        s.sendall(frame({"t": "relay", "token": token, "side": side}))
        return s

    def assert_responsive(self):
        """The real provider still gets introduced and spliced through the relay."""
        self.assertIsNone(self.rdv.poll(), "the rendezvous died")
        _, intro = self.introduce()
        self.assertEqual(intro["t"], "intro", intro)
        s = self.relay(intro["token"], "consumer")
        self.assertEqual(read_msg(s, 15)["t"], "relay_ok")  # the real provider's side arrived

    def fake_provider(self):
        peer, grant = rand_id(32), rand_id(10)
        p = self.conn()
        p.sendall(frame({"t": "register", "peer": peer, "grants": [grant], "candidates": []}))
        self.assertEqual(read_msg(p)["t"], "registered")
        return p, peer, grant

    def setUp(self):
        self.base_rss = self.rss()

    def tearDown(self):
        self.assert_responsive()
        grown = self.rss() - self.base_rss
        self.assertLess(grown, RSS_GROWTH_LIMIT, f"rendezvous RSS grew by {grown >> 20} MiB")

    # ---- faults ----
    def test_flood_of_introductions_for_unknown_links(self):
        refused = 0
        for batch in range(20):
            socks = []
            for _ in range(100):
                s = socket.create_connection(self.addr, timeout=5)
                s.sendall(frame({"t": "connect", "peer": rand_id(32), "grant": rand_id(10), "candidates": []}))
                socks.append(s)
            for s in socks:
                try:
                    if read_msg(s)["t"] == "error":
                        refused += 1
                except (ConnectionError, OSError):
                    refused += 1  # refused by the per-IP bound: closed
                s.close()
        self.assertEqual(refused, 2000)
        # Unknown grant of the real provider too.
        _, m = self.introduce(grant=rand_id(10))
        self.assertEqual(m["t"], "error")

    def test_half_open_connections(self):
        silent = [socket.create_connection(self.addr, timeout=5) for _ in range(150)]
        partial = []
        for i in range(50):
            s = socket.create_connection(self.addr, timeout=5)
            s.sendall(struct.pack("!I", 100) + b'{"t":"conn')  # a frame that never completes
            partial.append(s)
        self.assert_responsive()  # while they hang
        # Every one is closed by the first-message deadline (5 s).
        for s in silent + partial:
            self.assertTrue(closed_within(s, 8), "a half-open connection was never closed")
            s.close()

    def test_oversized_and_malformed_messages(self):
        bad = [
            struct.pack("!I", 0xFFFFFFFF) + b"x" * 64,
            struct.pack("!I", 4097) + b"{" * 4097,
            struct.pack("!I", 1 << 20),
            struct.pack("!I", 0),
            struct.pack("!I", 1) + b"{",
            frame(b"not json at all"),
            frame(b"\xff\xfe\x00garbage"),
            frame([1, 2, 3]),
            frame({"t": "nonsense"}),
            frame({"t": "register"}),
            frame({"t": "register", "peer": "short", "grants": [], "candidates": []}),
            frame({"t": "register", "peer": rand_id(32), "grants": [rand_id(10)] * 33, "candidates": []}),
            frame({"t": "connect", "peer": rand_id(32), "grant": rand_id(10), "candidates": ["1.2.3.4:5"] * 9}),
            frame({"t": "connect", "peer": rand_id(32), "grant": rand_id(10), "candidates": [{"x": 1}]}),
            frame({"t": "relay", "token": "a" * 26, "side": "mallory"}),
            frame({"t": "relay", "token": "../../etc/passwd", "side": "consumer"}),
            frame({"t": "pong", "n": "1e400"}),
            frame({"t": "intro"}),
            frame({"t": "relay_ok"}),
            bytes(random.getrandbits(8) for _ in range(3000)),
        ]
        for payload in bad:
            s = self.conn()
            try:
                s.sendall(payload)
            except OSError:
                pass
            self.assertTrue(closed_within(s, 8), f"not closed after {payload[:40]!r}")
        # A registered provider that sends garbage later is dropped too.
        p, _, _ = self.fake_provider()
        p.sendall(struct.pack("!I", 0x7FFFFFFF))
        self.assertTrue(closed_within(p, 8))

    def test_relay_side_that_never_reads(self):
        p, peer, grant = self.fake_provider()
        _, intro = self.introduce(peer, grant)
        token = intro["token"]
        a = self.relay(token, "provider")
        b = self.relay(token, "consumer")
        self.assertEqual(read_msg(a)["t"], "relay_ok")
        # b never reads: a writes until the relay pushes back.
        a.setblocking(False)
        sent, chunk, deadline = 0, b"\0" * 65536, time.time() + 4
        while time.time() < deadline:
            _, w, _ = select.select([], [a], [], 0.2)
            if not w:
                continue
            try:
                sent += a.send(chunk)
            except BlockingIOError:
                pass
        self.assertLess(sent, 128 * 1024 * 1024, "the relay buffered without bound")
        self.assert_responsive()  # the stalled pair blocks nobody else

    def test_third_party_cannot_join_or_precede(self):
        p, peer, grant = self.fake_provider()
        _, intro = self.introduce(peer, grant)
        token = intro["token"]
        a = self.relay(token, "provider")
        # Before the match: the parked side gets nothing, bytes it sends go nowhere,
        # and a second side of the same kind is refused.
        a.sendall(b"early bytes")
        r, _, _ = select.select([a], [], [], 1.0)
        self.assertFalse(r, "the relay answered a side before its pair was matched")
        dup = self.relay(token, "provider")
        self.assertEqual(read_msg(dup)["t"], "error")
        # A made-up token is refused.
        fake = self.relay(rand_id(26), "consumer")
        self.assertEqual(read_msg(fake)["t"], "error")
        b = self.relay(token, "consumer")
        self.assertEqual(read_msg(a)["t"], "relay_ok")
        self.assertEqual(read_msg(b)["t"], "relay_ok")
        # After the splice the token is spent: a third party on either side is refused.
        for side in ("provider", "consumer"):
            t = self.relay(token, side)
            self.assertEqual(read_msg(t)["t"], "error")
        # The pair itself works, both ways.
        a.sendall(b"ping-from-a")
        got = b""
        deadline = time.time() + 5
        while not got.endswith(b"ping-from-a") and time.time() < deadline:
            b.settimeout(1)
            got += b.recv(100)
        self.assertTrue(got.endswith(b"ping-from-a"), got)
        b.sendall(b"pong-from-b")
        self.assertEqual(recv_exact(a, 11, time.time() + 5), b"pong-from-b")


class RelayByteLimit(unittest.TestCase):
    """A spliced pair is closed once it has moved --max-relay-gb in one direction."""

    def setUp(self):
        if not os.path.exists(BIN):
            self.skipTest(f"runsnack binary not found at {BIN}")
        self.tmp = tempfile.mkdtemp(prefix="rdv-limit-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        env = dict(os.environ, RUNSNACK_HOME=os.path.join(self.tmp, "rdv"), RUNSNACK_LOG="warn")
        self.rdv = subprocess.Popen([BIN, "rendezvous", "--listen", "127.0.0.1:0", "--json", "--max-relay-gb", "0.002"],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(self.stop)
        port = int(json.loads(self.rdv.stdout.readline())["listen"].rsplit(":", 1)[1])
        self.addr = ("127.0.0.1", port)

    def stop(self):
        self.rdv.terminate()
        try:
            self.rdv.wait(10)
        except subprocess.TimeoutExpired:
            self.rdv.kill()
            self.rdv.wait()

    def conn(self):
        s = socket.create_connection(self.addr, timeout=5)
        self.addCleanup(s.close)
        return s

    def test_pair_closed_after_its_byte_limit(self):
        peer, grant = rand_id(32), rand_id(10)
        p = self.conn()
        p.sendall(frame({"t": "register", "peer": peer, "grants": [grant], "candidates": []}))
        self.assertEqual(read_msg(p)["t"], "registered")
        c = self.conn()
        c.sendall(frame({"t": "connect", "peer": peer, "grant": grant, "candidates": []}))
        while True:
            m = read_msg(c)
            if m["t"] == "ping":
                c.sendall(frame({"t": "pong", "n": m["n"]}))
            else:
                break
        self.assertEqual(m["t"], "intro", m)
        a, b = self.conn(), self.conn()
        a.sendall(frame({"t": "relay", "token": m["token"], "side": "provider"}))
        b.sendall(frame({"t": "relay", "token": m["token"], "side": "consumer"}))
        self.assertEqual(read_msg(a)["t"], "relay_ok")
        self.assertEqual(read_msg(b)["t"], "relay_ok")
        # Push 16 MB through a pair limited to 2 MB; the reader sees the end well before 16 MB.
        import threading
        def push():
            try:
                for _ in range(256):
                    a.sendall(b"x" * 65536)
            except OSError:
                pass
        t = threading.Thread(target=push)
        t.start()
        got, deadline = 0, time.time() + 30
        b.settimeout(5)
        while time.time() < deadline:
            try:
                chunk = b.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            got += len(chunk)
        t.join(30)
        self.assertGreaterEqual(got, 1_000_000, "the pair should relay up to its limit")
        self.assertLess(got, 8_000_000, f"the relay passed {got} bytes over a 2 MB limit")


if __name__ == "__main__":
    unittest.main()
