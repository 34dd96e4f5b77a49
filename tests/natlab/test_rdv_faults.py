#!/usr/bin/env python3
"""Fault tests for a real `runsnack rendezvous` process on 127.0.0.1.

Each test abuses the server with the real wire format (rdv_codec.hpp: u32
big-endian length + one JSON object) and then checks that it is still
responsive -- a real `runsnack share --rendezvous` provider still gets
introduced to a consumer and its relay side is spliced -- and that its
resident memory stayed bounded. Faults: floods of introductions for unknown
links, half-open connections, oversized and malformed messages, a relay side
that never reads, a third party joining a spliced pair, a relay side that
talks before its pair is matched; and (issue 15) a registration for someone
else's PeerId, relay attempts by peers that never proved a key, a consumer
presenting its token as the provider's side, per-IP relay limits. Fake
providers here prove their own keys (rdv_wire.Ed25519Key, via `openssl`).

Run: RUNSNACK_BIN=build/dev/src/cli/runsnack python3 -m unittest -v test_rdv_faults
"""
import json, os, random, select, shutil, socket, struct, subprocess, sys, tempfile, time, unittest

from rdv_wire import Ed25519Key, frame, provider_intro, read_msg, recv_exact, register

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("RUNSNACK_BIN") or os.path.join(REPO, "build", "dev", "src", "cli", "runsnack")
B32 = "abcdefghijklmnopqrstuvwxyz234567"
RSS_GROWTH_LIMIT = 64 * 1024 * 1024  # generous: the ASan build's allocator keeps freed memory a while


def rand_id(n):
    return "".join(random.choice(B32) for _ in range(n))


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
        """A provider of a key of its own (proven), serving one made-up grant."""
        key, grant = Ed25519Key(), rand_id(10)
        self.addCleanup(shutil.rmtree, key.dir, True)
        p = register(self.addr, key, [grant])
        self.addCleanup(p.close)
        return p, key.peer, grant

    def relay_pair(self, p, peer, grant):
        """Introduce a consumer to fake provider p; return the provider's and the consumer's relay tokens."""
        _, intro = self.introduce(peer, grant)
        self.assertEqual(intro["t"], "intro", intro)
        return provider_intro(p)["token"], intro["token"]

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
        token_p, token_c = self.relay_pair(p, peer, grant)
        a = self.relay(token_p, "provider")
        b = self.relay(token_c, "consumer")
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
        token_p, token_c = self.relay_pair(p, peer, grant)
        a = self.relay(token_p, "provider")
        # Before the match: the parked side gets nothing, bytes it sends go nowhere,
        # and a second side with the same token is refused.
        a.sendall(b"early bytes")
        r, _, _ = select.select([a], [], [], 1.0)
        self.assertFalse(r, "the relay answered a side before its pair was matched")
        dup = self.relay(token_p, "provider")
        self.assertEqual(read_msg(dup)["t"], "error")
        # A made-up token is refused; so is the consumer's token on the provider's side.
        fake = self.relay(rand_id(26), "consumer")
        self.assertEqual(read_msg(fake)["t"], "error")
        wrong_side = self.relay(token_c, "provider")
        self.assertEqual(read_msg(wrong_side)["t"], "error")
        b = self.relay(token_c, "consumer")
        self.assertEqual(read_msg(a)["t"], "relay_ok")
        self.assertEqual(read_msg(b)["t"], "relay_ok")
        # After the splice the tokens are spent: a third party on either side is refused.
        for token, side in ((token_p, "provider"), (token_c, "consumer"), (token_c, "provider")):
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


    # ---- issue 15: with nothing but a TCP connection, take over a provider's PeerId or use the relay ----
    def attacker_sees_intro(self, s, timeout=2.0):
        """Whether `s` (an attacker's signaling socket) receives an introduction (a consumer's address, a token)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                m = read_msg(s, max(0.05, deadline - time.time()))
            except (ConnectionError, OSError, ValueError):
                return False
            if m.get("t") == "ping":
                s.sendall(frame({"t": "pong", "n": m["n"]}))
            if m.get("t") == "intro":
                return True
        return False

    def test_registration_for_someone_elses_peer_id(self):
        mallory = Ed25519Key()
        self.addCleanup(shutil.rmtree, mallory.dir, True)
        # 1. Claims the real provider's PeerId and answers the challenge with her own key.
        s1 = self.conn()
        s1.sendall(frame({"t": "register", "peer": self.peer, "grants": [self.grant], "candidates": []}))
        first = read_msg(s1)
        if first["t"] == "challenge":
            s1.sendall(frame(mallory.prove(first, peer=self.peer)))
        # 2. Claims it and answers nothing (holds the connection open).
        s2 = self.conn()
        s2.sendall(frame({"t": "register", "peer": self.peer, "grants": [self.grant], "candidates": []}))
        # 3. Claims it with the victim's public key and her own signature.
        s3 = self.conn()
        s3.sendall(frame({"t": "register", "peer": self.peer, "grants": [self.grant], "candidates": []}))
        third = read_msg(s3)
        if third["t"] == "challenge":
            forged = mallory.prove(third, peer=self.peer)
            s3.sendall(frame(forged))
        # A consumer asks for the real provider now: the real one is introduced (and its relay
        # side spliced), and none of the attacker's connections sees the consumer.
        _, intro = self.introduce()
        self.assertEqual(intro["t"], "intro", intro)
        relay = self.relay(intro["token"], "consumer")
        self.assertEqual(read_msg(relay, 15)["t"], "relay_ok", "the real provider did not join its relay")
        for s in (s1, s2, s3):
            self.assertFalse(self.attacker_sees_intro(s), "an unproven registration was sent an introduction")
        self.assertTrue(closed_within(s1, 8) and closed_within(s3, 8), "a failed proof must close the connection")

    def test_relay_attempts_by_unregistered_peers(self):
        # A "provider" that never proves a key cannot be introduced to, so it gets no token ...
        peer, grant = rand_id(32), rand_id(10)
        p = self.conn()
        p.sendall(frame({"t": "register", "peer": peer, "grants": [grant], "candidates": []}))
        _, m = self.introduce(peer, grant)
        self.assertEqual(m["t"], "error", "an unproven registration was introduced to: %r" % m)
        # ... and a consumer of a real provider holds only its own side's token.
        _, intro = self.introduce()
        self.assertEqual(intro["t"], "intro")
        as_provider = self.relay(intro["token"], "provider")
        self.assertEqual(read_msg(as_provider)["t"], "error", "a consumer's token opened the provider side")
        consumer = self.relay(intro["token"], "consumer")
        self.assertEqual(read_msg(consumer, 15)["t"], "relay_ok")  # the real provider's own side
        # Tokens nobody minted.
        for side in ("provider", "consumer"):
            self.assertEqual(read_msg(self.relay(rand_id(26), side))["t"], "error")


class RelayByteLimit(unittest.TestCase):
    """A spliced pair is closed once it has moved --max-relay-gb in one direction."""

    def setUp(self):
        if not os.path.exists(BIN):
            self.skipTest(f"runsnack binary not found at {BIN}")
        self.tmp = tempfile.mkdtemp(prefix="rdv-limit-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        env = dict(os.environ, RUNSNACK_HOME=os.path.join(self.tmp, "rdv"), RUNSNACK_LOG="warn")
        self.rdv = subprocess.Popen([BIN, "rendezvous", "--listen", "127.0.0.1:0", "--json", "--max-relay-gb", "0.002",
                                     "--max-relays-per-ip", "3", "--max-relay-mbps", "0"],
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

    def pair(self):
        """A proven provider of its own key and a consumer introduced to it: both relay tokens."""
        key, grant = Ed25519Key(), rand_id(10)
        self.addCleanup(shutil.rmtree, key.dir, True)
        p = register(self.addr, key, [grant])
        self.addCleanup(p.close)
        c = self.conn()
        c.sendall(frame({"t": "connect", "peer": key.peer, "grant": grant, "candidates": []}))
        while True:
            m = read_msg(c)
            if m["t"] == "ping":
                c.sendall(frame({"t": "pong", "n": m["n"]}))
            else:
                break
        self.assertEqual(m["t"], "intro", m)
        return provider_intro(p)["token"], m["token"]

    def test_relay_sides_bounded_per_address(self):
        # --max-relays-per-ip 3 (setUp): a fourth side from 127.0.0.1 is refused.
        sides = []
        for _ in range(2):
            token_p, token_c = self.pair()
            sides.append((token_p, "provider"))
            sides.append((token_c, "consumer"))
        socks = []
        for token, side in sides[:3]:
            s = self.conn()
            s.sendall(frame({"t": "relay", "token": token, "side": side}))
            socks.append(s)
        self.assertEqual(read_msg(socks[0])["t"], "relay_ok")
        self.assertEqual(read_msg(socks[1])["t"], "relay_ok")
        fourth = self.conn()
        fourth.sendall(frame({"t": "relay", "token": sides[3][0], "side": sides[3][1]}))
        m = read_msg(fourth)
        self.assertEqual(m["t"], "error")
        self.assertIn("too many", m["reason"])

    def test_pair_closed_after_its_byte_limit(self):
        token_p, token_c = self.pair()
        a, b = self.conn(), self.conn()
        a.sendall(frame({"t": "relay", "token": token_p, "side": "provider"}))
        b.sendall(frame({"t": "relay", "token": token_c, "side": "consumer"}))
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
