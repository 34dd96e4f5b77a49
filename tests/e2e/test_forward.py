"""Port forwarding end to end: `runsnack share --expose` and `runsnack forward`, with real servers
(Python standard library) started by the tests on 127.0.0.1."""

import base64
import hashlib
import os
import signal
import socket
import socketserver
import struct
import threading
import time
import unittest

from harness import E2ETestCase, READY_DEADLINE, free_port


# --- servers --------------------------------------------------------------------------------

class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def start_server(test, handler):
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        server.shutdown()
        server.server_close()
    test.addCleanup(stop)
    return server, server.server_address[1]


class EchoHandler(socketserver.BaseRequestHandler):
    """Echoes until the client half-closes, then half-closes back."""

    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                break
            self.request.sendall(data)
        self.request.shutdown(socket.SHUT_WR)


class BannerEchoHandler(socketserver.BaseRequestHandler):
    """Speaks first, then echoes: a client that never sends still hears from it."""

    def handle(self):
        self.request.sendall(b"hello\n")
        EchoHandler.handle(self)


def read_headers(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise AssertionError("connection closed inside headers: %r" % data)
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def recv_exact(sock, n, timeout=10):
    sock.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise AssertionError("early EOF after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def recv_all(sock, timeout=30):
    sock.settimeout(timeout)
    out = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(out)
        out.append(chunk)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_frame(payload, mask):
    header = bytes([0x81])
    n = len(payload)
    mbit = 0x80 if mask else 0
    if n < 126:
        header += bytes([mbit | n])
    elif n < 65536:
        header += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        header += bytes([mbit | 127]) + struct.pack("!Q", n)
    if not mask:
        return header + payload
    key = os.urandom(4)
    return header + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_read_frame(sock):
    b0, b1 = recv_exact(sock, 2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", recv_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(sock, 8))[0]
    key = recv_exact(sock, 4) if b1 & 0x80 else None
    payload = recv_exact(sock, n) if n else b""
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return b0 & 0x0F, payload


class WebSocketEchoHandler(socketserver.BaseRequestHandler):
    def handle(self):
        head, _ = read_headers(self.request)
        key = [l.split(":", 1)[1].strip() for l in head.split("\r\n") if l.lower().startswith("sec-websocket-key:")][0]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.request.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
        while True:
            opcode, payload = ws_read_frame(self.request)
            if opcode == 0x8:
                self.request.sendall(bytes([0x88, 0]))
                return
            self.request.sendall(ws_frame(payload, mask=False))


# --- tests ----------------------------------------------------------------------------------

class ForwardTestCase(E2ETestCase):
    def share_and_forward(self, expose, specs, share_extra=(), forward_extra=()):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        args = []
        for e in expose:
            args += ["--expose", e]
        provider = self.start_provider(phome, *(args + list(share_extra)))
        fwd = self.start(chome, "forward", "--json", provider.link, *(list(specs) + list(forward_extra)),
                         name="forward")
        fwd.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "forward ready")
        ports = [e["port"] for e in fwd.events() if e.get("event") == "listening"]
        return phome, provider, fwd, ports

    def forward_audit(self, phome):
        return [e for e in self.audit(phome) if e["kind"] == "forward"]


class Forward(ForwardTestCase):
    def test_http_chunks_arrive_as_produced_with_host_rewrite(self):
        received = []  # chunks the client has seen, in order
        arrived = [threading.Event() for _ in range(5)]
        hosts = []

        class Streaming(socketserver.BaseRequestHandler):
            def handle(self):
                head, _ = read_headers(self.request)
                hosts.extend(l.split(":", 1)[1].strip() for l in head.split("\r\n") if l.lower().startswith("host:"))
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                                     b"Transfer-Encoding: chunked\r\n\r\n")
                for i in range(5):
                    body = b'{"token":%d}\n' % i
                    self.request.sendall(b"%x\r\n%s\r\n" % (len(body), body))
                    # The next chunk only once the client has this one: no buffering anywhere.
                    if not arrived[i].wait(10):
                        return
                    time.sleep(0.2)
                self.request.sendall(b"0\r\n\r\n")

        _, port = start_server(self, Streaming)
        phome, provider, fwd, ports = self.share_and_forward(["web=127.0.0.1:%d,host-header" % port], ["0:web"])
        s = connect(ports[0])
        s.sendall(b"GET /api/generate HTTP/1.1\r\nHost: example.org:9999\r\n\r\n")
        head, rest = read_headers(s)
        self.assertIn("200 OK", head)
        buf = rest
        s.settimeout(5)
        for i in range(5):
            want = b'{"token":%d}\n' % i
            while want not in buf:
                chunk = s.recv(4096)
                self.assertTrue(chunk, "EOF before chunk %d" % i)
                buf += chunk
            received.append(i)
            arrived[i].set()
        while not buf.endswith(b"0\r\n\r\n"):
            chunk = s.recv(4096)
            self.assertTrue(chunk)
            buf += chunk
        s.close()
        self.assertEqual(received, list(range(5)))
        self.assertEqual(hosts, ["127.0.0.1:%d" % port])

    def test_websocket_echo(self):
        _, port = start_server(self, WebSocketEchoHandler)
        phome, provider, fwd, ports = self.share_and_forward(["ws=127.0.0.1:%d,host-header" % port], ["0:ws"])
        s = connect(ports[0])
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(("GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % key).encode())
        head, rest = read_headers(s)
        self.assertIn("101", head.split("\r\n")[0])
        self.assertEqual(rest, b"")
        for payload in (b"hi", os.urandom(300), os.urandom(70000), b"Host: not rewritten\r\n\r\n"):
            s.sendall(ws_frame(payload, mask=True))
            opcode, echoed = ws_read_frame(s)
            self.assertEqual((opcode, echoed), (1, payload))
        s.sendall(bytes([0x88, 0x80]) + os.urandom(4))
        self.assertEqual(recv_exact(s, 2), bytes([0x88, 0]))
        s.close()

    def test_500_concurrent_connections_byte_exact_with_half_close(self):
        _, port = start_server(self, EchoHandler)
        phome, provider, fwd, ports = self.share_and_forward([str(port)], ["0:%d" % port])
        n, size = 500, 32 * 1024
        errors = []
        start = threading.Barrier(n)

        def client(i):
            try:
                payload = os.urandom(size)
                s = connect(ports[0])
                start.wait(60)
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)  # half-close: the echo must still come back
                got = recv_all(s, timeout=120)
                s.close()
                if got != payload:
                    errors.append("connection %d: %d bytes back, equal=%s" % (i, len(got), got == payload))
            except Exception as e:  # collected, reported once
                errors.append("connection %d: %r" % (i, e))
        threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
        self.assertEqual(errors[:5], [])
        closed = self.poll_until(lambda: [e for e in fwd.events() if e.get("event") == "closed"] if len(
            [e for e in fwd.events() if e.get("event") == "closed"]) >= n else None, 60, "500 closed events")
        self.assertTrue(all(e["bytes_sent"] == size and e["bytes_received"] == size for e in closed[:n]))
        sessions = provider.events_named("session_open")
        self.assertEqual(len(sessions), 1, "all connections must share one session")

    def test_target_not_exposed_is_refused_before_listening(self):
        _, port = start_server(self, EchoHandler)
        other = free_port()
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome, "--expose", "web=127.0.0.1:%d" % port)
        local = free_port()
        cp = self.run_cli(chome, "forward", "--json", provider.link, "%d:%d" % (local, other))
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn("does not expose '%d'" % other, cp.stderr)
        self.assertIn("web (port %d)" % port, cp.stderr)
        self.assertNotIn('"listening"', cp.stdout)
        # Nothing listened on the local port.
        with socket.socket() as s:
            self.assertNotEqual(s.connect_ex(("127.0.0.1", local)), 0)
        # By name or by its port, the exposed one is fine.
        fwd = self.start(chome, "forward", "--json", provider.link, "0:%d" % port, name="forward")
        fwd.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "forward ready")

    def test_target_that_refuses_connections(self):
        dead = free_port()  # nothing listens there
        phome, provider, fwd, ports = self.share_and_forward(["dead=%d" % dead], ["0:dead"])
        s = connect(ports[0])
        self.assertEqual(recv_all(s, timeout=20), b"")
        ev = fwd.wait_for(lambda e: e.get("event") == "refused", READY_DEADLINE, "refused event")
        self.assertIn("could not connect", ev["reason"])
        self.assertIn("refused", ev["reason"].lower())
        logged = self.poll_until(lambda: [e for e in self.forward_audit(phome) if e["decision"] == "refuse"], 20,
                                 "forward refusal in the audit log")
        self.assertIn("127.0.0.1:%d" % dead, logged[0]["reason"])

    def test_client_that_opens_and_never_sends_stays_connected(self):
        _, port = start_server(self, BannerEchoHandler)
        phome, provider, fwd, ports = self.share_and_forward(["banner=%d" % port], ["0:banner"])
        idle = connect(ports[0])
        self.assertEqual(recv_exact(idle, 6), b"hello\n")
        # Idle for a while (past the session's keepalive interval): still open, nothing arrives.
        idle.settimeout(7)
        with self.assertRaises(socket.timeout):
            idle.recv(1)
        # Others are served meanwhile.
        other = connect(ports[0])
        self.assertEqual(recv_exact(other, 6), b"hello\n")
        other.sendall(b"ping")
        self.assertEqual(recv_exact(other, 4), b"ping")
        other.close()
        idle.sendall(b"late")
        self.assertEqual(recv_exact(idle, 4), b"late")
        idle.shutdown(socket.SHUT_WR)
        self.assertEqual(recv_all(idle), b"")
        idle.close()
        # The idle connection's record: the long one (the other lasted well under a second).
        logged = self.poll_until(lambda: [e for e in self.forward_audit(phome) if e["decision"] == "accept"
                                          and e["detail"]["seconds"] > 6], 20, "forward accept logged")
        d = logged[0]["detail"]
        self.assertEqual((d["target"], d["bytes_to_target"], d["bytes_from_target"]), ("banner", 4, 10))

    def test_bandwidth_limit_holds_within_ten_percent(self):
        rate = 1_000_000  # --bandwidth 8mbit

        class Source(socketserver.BaseRequestHandler):
            def handle(self):
                block = b"\0" * 65536
                try:
                    while True:
                        self.request.sendall(block)
                except OSError:
                    pass

        _, port = start_server(self, Source)
        phome, provider, fwd, ports = self.share_and_forward([str(port)], ["0:%d" % port],
                                                             share_extra=["--bandwidth", "8mbit"])
        s = connect(ports[0])
        s.settimeout(10)
        got = len(s.recv(65536))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5.0:
            got += len(s.recv(65536))
        elapsed = time.monotonic() - t0
        s.close()
        measured = got / elapsed
        self.assertLess(abs(measured - rate) / rate, 0.10, "measured %.0f B/s against a limit of %d" % (measured, rate))

    def test_audit_records_survive_a_clean_shutdown(self):
        # Forward records are written in batches, a fraction of a second late: stopping the provider
        # right after the last connection must still write every record.
        _, port = start_server(self, EchoHandler)
        phome, provider, fwd, ports = self.share_and_forward([str(port)], ["0:%d" % port])
        n = 20
        for i in range(n):
            s = connect(ports[0])
            s.sendall(b"x%02d" % i)
            s.shutdown(socket.SHUT_WR)
            self.assertEqual(recv_all(s), b"x%02d" % i)
            s.close()
        provider.signal(signal.SIGTERM)
        self.assertEqual(provider.wait(30), 0, "provider did not exit 0 on SIGTERM: %s" % provider.stderr())
        accepts = [e["detail"] for e in self.forward_audit(phome) if e["decision"] == "accept"]
        self.assertEqual(sorted(d["bytes_to_target"] for d in accepts), [3] * n, accepts)

    def test_unknown_name_and_link_without_forward(self):
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        plain = self.start_provider(phome)
        self.fails(chome, "forward", plain.link, "11434", contains="--expose")
        exposed = self.start_provider(phome, "--expose", "web=%d" % free_port(), name="provider2")
        self.fails(chome, "forward", exposed.link, "nope", contains=["does not expose 'nope'", "web"])


class Reconnect(ForwardTestCase):
    def test_forward_reconnects_after_the_provider_is_killed_and_restarted(self):
        _, port = start_server(self, EchoHandler)
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        listen = "127.0.0.1:%d" % free_port()  # the restarted provider must be where the link points
        first = self.start_provider(phome, "--expose", "echo=%d" % port, listen=listen, name="provider1")
        fwd = self.start(chome, "forward", "--json", first.link, "0:echo", name="forward")
        fwd.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "forward ready")
        local = [e["port"] for e in fwd.events() if e.get("event") == "listening"][0]

        def round_trip(payload):
            s = connect(local)
            try:
                s.sendall(payload)
                s.shutdown(socket.SHUT_WR)
                return recv_all(s, timeout=30)  # a connection made while the session is down waits for it
            finally:
                s.close()

        self.assertEqual(round_trip(b"before"), b"before")
        first.signal(signal.SIGKILL)
        self.assertIsNotNone(first.wait(10), "the provider did not die")
        fwd.wait_for(lambda e: e.get("event") == "session_lost", READY_DEADLINE, "session_lost")

        second = self.start_provider(phome, "--serve-only", listen=listen, name="provider2")

        def works():
            try:
                return round_trip(b"after") == b"after"
            except OSError:
                return False
        self.poll_until(works, 60, "a request through the same forward after the provider restarted")
        self.assertTrue(fwd.alive(), "runsnack forward exited: %s" % fwd.stderr())
        self.assertTrue([e for e in fwd.events() if e.get("event") == "reconnected"], fwd.events())
        self.assertEqual(len(second.events_named("session_open")), 1)
        # The new provider logged the forwarded connection.
        logged = self.poll_until(lambda: [e for e in self.forward_audit(phome) if e["decision"] == "accept"
                                          and e["detail"]["bytes_to_target"] == 5], 20, "forward accept logged")
        self.assertEqual(logged[0]["detail"]["target"], "echo")

    def test_a_kicked_forward_stops_and_says_why(self):
        # Issue 39 item 6: a session the provider ended on purpose and said so (its goodbye) is not made
        # again: a new one would undo the kick.
        _, port = start_server(self, EchoHandler)
        phome, chome = self.new_home("provider"), self.new_home("consumer")
        provider = self.start_provider(phome, "--expose", "echo=%d" % port)
        fwd = self.start(chome, "forward", "--json", provider.link, "0:echo", name="forward")
        fwd.wait_for(lambda e: e.get("event") == "ready", READY_DEADLINE, "forward ready")
        session = provider.wait_for(lambda e: e.get("event") == "session_open", READY_DEADLINE, "session_open")
        self.ok(phome, "kick", session["session"])
        self.assertEqual(fwd.wait(30), 1, fwd.stderr())
        ended = [e for e in fwd.events() if e.get("event") == "session_ended"]
        self.assertEqual([e["ended"] for e in ended], ["kicked"], fwd.events())
        self.assertFalse([e for e in fwd.events() if e.get("event") == "reconnected"], fwd.events())
        self.assertIn("runsnack: the provider ended this session (kicked)", fwd.stderr())
        self.assertEqual(len(provider.events_named("session_open")), 1)


if __name__ == "__main__":
    unittest.main()
