"""Remote CUDA end to end: `runsnack share --allow cuda` and `runsnack cuda LINK -- CMD`.

The provider runs with RUNSNACK_CUDA_BACKEND=host: its cuda-server backs device memory with host RAM
and runs only the test programs' own kernels, in C++ (a test double; no GPU here). Two groups:

- Plumbing (no CUDA toolkit needed): small Python programs stand in for CUDA processes and talk to
  $RUNSNACK_CUDA_SOCKET directly; RUNSNACK_CUDA_LIBDIR points at a folder with a placeholder
  libcuda.so.1 (Python never loads it). Refusals, errors, the server's end closing the connection,
  exit status and signals, a consumer killed mid-run leaving no cuda-server behind, and the host
  double's memory bound (an allocation past it is CUDA_ERROR_OUT_OF_MEMORY).
- Program (`python3 test_cuda.py --program`, exit 77 = skipped where nvcc is absent): the nvcc-built
  static-cudart tests/cuda/vector_add.cu through the real shim: the remote (fake) device's name, the
  memcpy round trip and memset, and its kernel's result; and tests/netlab/cuda_loop's synchronous
  round trips (RUNSNACK_CUDA_STATS=1): one per copy back, none per launch or copy to the device.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from harness import E2ETestCase, BIN, REPO

HOST_BACKEND = {"RUNSNACK_CUDA_BACKEND": "host"}
VECTOR_ADD_SRC = os.path.join(REPO, "tests", "cuda", "vector_add.cu")
SKIP = 77


def find_nvcc():
    return shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.access(p, os.X_OK)), None)


def pid_alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


# A stand-in CUDA process: connects like the shim does, then does what argv[1] says.
CLIENT = r"""
import os, signal, socket, sys, time
mode = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["RUNSNACK_CUDA_SOCKET"])
print("connected pid=%d" % os.getpid(), flush=True)
if mode == "garbage":
    # Not the CUDA wire protocol: the server must give up and its end of the connection close.
    s.sendall(b"\xff" * 64)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(30)
    rest = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    print("eof after %d bytes" % len(rest), flush=True)
    sys.exit(5)
if mode == "wait-int":
    try:
        time.sleep(600)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(42)
if mode == "read":
    # Reads until the connection ends, as the shim waits for a reply.
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    print("connection ended", flush=True)
    sys.exit(3)
if mode == "sleep":
    time.sleep(600)
if mode == "alloc":
    # Synchronous requests as the shim makes them: [u32 length][u16 op][u16 flags=1][u32 seq] payload.
    import struct
    def read(n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                sys.exit("the server closed the connection")
            data += chunk
        return data
    def call(op, payload, seq=[0]):
        seq[0] += 1
        s.sendall(struct.pack("<IHHI", len(payload), op, 1, seq[0]) + payload)
        while True:
            length, reply_op, _, _ = struct.unpack("<IHHI", read(12))
            body = read(length)
            if reply_op == 1:  # Reply: [i32 result] fields
                return struct.unpack("<i", body[:4])[0], body[4:]
    call(10, struct.pack("<I", 1))  # Hello
    ctx = struct.unpack("<Q", call(12, struct.pack("<i", 0))[1][:8])[0]  # PrimaryCtxRetain
    free, total = struct.unpack("<QQ", call(15, struct.pack("<Q", ctx))[1][:16])  # MemGetInfo
    print("total %d" % total)
    print("past total: %d" % call(14, struct.pack("<QQ", ctx, total + 1))[0])  # MemAlloc
    print("1 MiB: %d" % call(14, struct.pack("<QQ", ctx, 1 << 20))[0])
"""


class CudaBase(E2ETestCase):
    def setUp(self):
        super().setUp()
        self.extra_pids = []
        # find_cuda_shim_dir() wants a folder holding libcuda.so.1; Python never loads it.
        self.fake_libdir = os.path.join(self.tmp, "fake-shim")
        os.makedirs(self.fake_libdir)
        open(os.path.join(self.fake_libdir, "libcuda.so.1"), "w").close()
        self.client = os.path.join(self.tmp, "client.py")
        with open(self.client, "w") as f:
            f.write(CLIENT)

    def tearDown(self):
        for pid in self.extra_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        super().tearDown()

    def pair(self, allow="cuda", env=None):
        self.phome, self.chome = self.new_home("provider"), self.new_home("consumer")
        self.provider = self.start_provider(self.phome, "--allow", allow, env_extra=env or HOST_BACKEND)

    def consumer_env(self):
        return {"RUNSNACK_CUDA_LIBDIR": self.fake_libdir}

    def cuda_events(self, kind):
        return [e for e in self.audit(self.phome) if e["kind"] == kind]

    def final_json(self, stdout):
        lines = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
        self.assertTrue(lines, "no JSON line on stdout: %r" % stdout)
        self.assertEqual(lines[-1]["event"], "exit")
        return lines[-1]


class Plumbing(CudaBase):
    def test_link_without_cuda_is_refused(self):
        self.pair(allow="run")
        line = self.fails(self.chome, "cuda", self.provider.link, "--", sys.executable, "-c", "print(1)",
                          env_extra=self.consumer_env(), contains=["does not allow cuda", "--allow cuda"])
        self.assertNotIn("internal", line)

    def test_missing_command(self):
        self.pair()
        self.fails(self.chome, "cuda", self.provider.link, "--", "no-such-program-4711",
                   env_extra=self.consumer_env(), contains="command not found")
        self.fails(self.chome, "cuda", self.provider.link, "--", "./no/such/file",
                   env_extra=self.consumer_env(), contains="no such file")

    def test_nothing_to_run(self):
        cp = self.run_cli(self.new_home(), "cuda", "LINK")
        self.assertNotEqual(cp.returncode, 0)

    def test_server_end_closes_connection_and_status_passes_through(self):
        self.pair()
        cp = self.run_cli(self.chome, "cuda", "--json", self.provider.link, "--", sys.executable, self.client,
                          "garbage", env_extra=self.consumer_env())
        self.assertEqual(cp.returncode, 5, cp.stderr)
        self.assertIn("eof after", cp.stdout)
        final = self.final_json(cp.stdout)
        self.assertEqual(final["status"], 5)
        self.assertEqual(final["connections"], 1)
        self.assertEqual(final["bytes_to_provider"], 64)
        self.assertFalse(final["session_lost"])
        ends = self.poll_until(lambda: self.cuda_events("cuda_end"), 10, "the cuda_end audit record")
        self.assertEqual(len(ends), 1, ends)
        self.assertNotEqual(ends[0]["detail"]["exit_status"], 0)  # a protocol error ends the server
        self.assertEqual(ends[0]["detail"]["bytes_to_server"], 64)
        starts = self.cuda_events("cuda_start")
        self.assertEqual(starts[0]["decision"], "accept")
        self.assertEqual(starts[0]["detail"]["backend"], "host")
        self.assertFalse(pid_alive(starts[0]["detail"]["pid"]))

    def test_host_backend_memory_is_bounded(self):
        # Issue 37: 1 GiB per server, 16 servers per session, with no --memory behind it. Now a session's 16
        # servers hold at most what one GPU of 4 GiB would; past it, CUDA_ERROR_OUT_OF_MEMORY (2), and the
        # server goes on serving.
        self.pair()
        cp = self.run_cli(self.chome, "cuda", self.provider.link, "--", sys.executable, self.client, "alloc",
                          env_extra=self.consumer_env())
        self.assertEqual(cp.returncode, 0, cp.stdout + cp.stderr)
        total = int(re.search(r"^total (\d+)$", cp.stdout, re.M).group(1))
        self.assertLessEqual(16 * total, 4 << 30, cp.stdout)
        self.assertIn("past total: 2\n", cp.stdout)
        self.assertIn("1 MiB: 0\n", cp.stdout)

    def test_signal_reaches_program(self):
        self.pair()
        proc = self.start(self.chome, "cuda", "--json", self.provider.link, "--", sys.executable, self.client,
                          "wait-int", env_extra=self.consumer_env(), name="cuda")
        self.poll_until(lambda: any("connected" in l for l in proc.lines), 30, "the program's connection")
        self.extra_pids.append(int([l for l in proc.lines if "connected" in l][0].split("pid=")[1]))
        proc.signal(signal.SIGINT)
        self.assertEqual(proc.wait(30), 42, proc.stderr())
        self.assertIn("interrupted", proc.lines)
        self.poll_until(lambda: self.cuda_events("cuda_end"), 10, "the server's end")

    def test_killed_consumer_leaves_no_server(self):
        self.pair()
        proc = self.start(self.chome, "cuda", self.provider.link, "--", sys.executable, self.client, "sleep",
                          env_extra=self.consumer_env(), name="cuda")
        self.poll_until(lambda: any("connected" in l for l in proc.lines), 30, "the program's connection")
        program = int([l for l in proc.lines if "connected" in l][0].split("pid=")[1])
        self.extra_pids.append(program)
        # The program holds its own socket to RUNSNACK_CUDA_SOCKET and nothing of runsnack's (the
        # session's TCP socket once leaked into it: the provider then missed the consumer's death).
        sockets = [fd for fd in os.listdir("/proc/%d/fd" % program)
                   if os.readlink("/proc/%d/fd/%s" % (program, fd)).startswith("socket:")]
        self.assertEqual(len(sockets), 1, sockets)
        starts = self.poll_until(lambda: self.cuda_events("cuda_start"), 10, "the cuda_start audit record")
        pid = starts[0]["detail"]["pid"]
        self.assertTrue(pid_alive(pid), "the cuda-server should run while the program does")
        self.assertIn(b"cuda-server", cmdline(pid))
        # `runsnack sessions` lists the server under the session, by the pid the audit names.
        def servers():
            live = json.loads(self.ok(self.phome, "sessions", "--json").stdout)
            return [c for s in live for c in s["commands"] if c["command"].startswith("cuda-server")]
        self.assertEqual([c["pid"] for c in servers()], [pid])
        proc.signal(signal.SIGKILL)
        self.poll_until(lambda: not pid_alive(pid), 15, "cuda-server %d gone after the consumer died" % pid,
                        interval=0.1)
        self.poll_until(lambda: not servers(), 10, "the server's row to go")
        ends = self.poll_until(lambda: self.cuda_events("cuda_end"), 10, "the cuda_end audit record")
        self.assertIn("went away", ends[0]["reason"])

    def test_lost_session_ends_connections_and_is_reported(self):
        self.pair()
        proc = self.start(self.chome, "cuda", self.provider.link, "--", sys.executable, self.client, "read",
                          env_extra=self.consumer_env(), name="cuda")
        self.poll_until(lambda: any("connected" in l for l in proc.lines), 30, "the program's connection")
        self.extra_pids.append(int([l for l in proc.lines if "connected" in l][0].split("pid=")[1]))
        pid = self.poll_until(lambda: self.cuda_events("cuda_start"), 10, "cuda_start")[0]["detail"]["pid"]
        self.provider.signal(signal.SIGKILL)
        self.assertEqual(proc.wait(30), 3, proc.stderr())
        self.assertIn("connection ended", proc.lines)
        self.assertIn("session to the provider ended", proc.stderr())
        # The server outlived its provider only until its socket's EOF.
        self.poll_until(lambda: not pid_alive(pid), 15, "the orphaned cuda-server %d gone" % pid, interval=0.1)

    def test_info_shows_cuda(self):
        self.pair()
        info = self.info(self.chome, self.provider.link)
        self.assertIn("cuda", info["grant"]["services"])
        self.assertEqual(info["cuda"]["backend"], "host")
        self.assertTrue(info["cuda"]["available"])


class Program(CudaBase):
    """vector_add.cu built by nvcc (static cudart) through the real shim; needs nvcc and the built shim."""

    @classmethod
    def setUpClass(cls):
        nvcc = find_nvcc()
        if not nvcc:
            raise unittest.SkipTest("nvcc not found")
        cls.build = tempfile.mkdtemp(prefix="runsnack-cuda-prog-")
        cls.vector_add = os.path.join(cls.build, "vector_add")
        cp = subprocess.run([nvcc, "-o", cls.vector_add, VECTOR_ADD_SRC], capture_output=True, text=True,
                            timeout=600)
        if cp.returncode != 0:
            raise AssertionError("nvcc failed: %s" % cp.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.build, ignore_errors=True)

    def test_vector_add_against_host_double(self):
        shim = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(BIN))), "cuda-shim")
        self.assertTrue(os.path.exists(os.path.join(shim, "libcuda.so.1")),
                        "the CUDA shim is not built next to %s (build the runsnack target with cuda.h found)" % BIN)
        self.pair()
        cp = self.run_cli(self.chome, "cuda", "--json", self.provider.link, "--", self.vector_add, timeout=120)
        out = cp.stdout
        self.assertIn("device 0: RunSnack HostBackend", out, cp.stderr)
        self.assertIn("round trip: ok", out)
        self.assertIn("memset result: ok", out)
        self.assertIn("kernel: cudaSuccess", out)
        self.assertIn("result: ok", out)  # c = a + b: the arguments reached the (host) kernel right
        self.assertEqual(cp.returncode, 0, out + cp.stderr)
        final = self.final_json(out)
        self.assertEqual(final["status"], 0)
        self.assertGreaterEqual(final["connections"], 1)
        self.assertGreater(final["bytes_to_provider"], 8 << 20)  # two 4 MiB copies to the device
        self.assertGreater(final["bytes_from_provider"], 12 << 20)  # three 4 MiB copies back
        ends = self.poll_until(lambda: self.cuda_events("cuda_end"), 10, "the cuda_end audit record")
        self.assertFalse(pid_alive(ends[0]["detail"]["pid"]))

    def sync_round_trips(self, cuda_loop, rounds):
        """The synchronous round trips `runsnack cuda` reports for `cuda_loop ROUNDS`."""
        cp = self.run_cli(self.chome, "cuda", self.provider.link, "--", cuda_loop, str(rounds),
                          env_extra={"RUNSNACK_CUDA_STATS": "1"}, timeout=300)
        self.assertEqual(cp.returncode, 0, cp.stdout[-2000:] + cp.stderr[-2000:])
        self.assertIn("RESULT rounds %d" % rounds, cp.stdout)  # every round's data came back + 1
        m = re.search(r"(\d+) synchronous round trips", cp.stderr)
        self.assertIsNotNone(m, "no RUNSNACK_CUDA_STATS line in: " + cp.stderr[-2000:])
        return int(m.group(1))

    def test_one_round_trip_per_copy_back_none_per_launch(self):
        cuda_loop = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(BIN))), "tests", "netlab",
                                 "cuda_loop")
        self.assertTrue(os.access(cuda_loop, os.X_OK), "%s is not built (the build found nvcc)" % cuda_loop)
        self.pair()
        # Each round: a copy to the device, a launch, a copy back. The start-up's round trips are
        # the same for both runs, so the difference is what 40 rounds cost.
        few, many = self.sync_round_trips(cuda_loop, 10), self.sync_round_trips(cuda_loop, 50)
        self.assertEqual(many - few, 40, "%d and %d round trips for 10 and 50 rounds" % (few, many))


if __name__ == "__main__":
    if "--program" in sys.argv:
        sys.argv.remove("--program")
        if not find_nvcc():
            print("nvcc not found: skipped")
            sys.exit(SKIP)
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Program)
    else:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Plumbing)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
