"""A throwaway copy of this machine's root to install packages into (tests/package).

Runs inside a private mount and network namespace (the caller re-executes itself under
`unshare --mount --net`): an overlay whose lower layer is the real / and whose upper layer
is a tmpfs, so everything dpkg, adduser and the services write lands in memory and is gone
when the namespace ends. The real machine is never written. `changes()` lists what the
overlay holds, so a test can check that a purge left nothing behind.

Units are started by hand (no systemd here): `start_unit` reads the installed unit file and
runs its ExecStart as its User=, emulating the hardening that matters for paths and
permissions: the root read-only except ReadWritePaths= (ProtectSystem=strict), empty /home,
/root and /run/user (ProtectHome), a private /tmp (PrivateTmp), no new privileges
(NoNewPrivileges) and its UMask.
"""

import os
import re
import shlex
import subprocess
import tempfile


class ThrowawayRoot:
    def __init__(self, tmpfs_size="4g"):
        self.base = tempfile.mkdtemp(prefix="runsnack-root-")
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + tmpfs_size, "tmpfs", self.base], check=True)
        for d in ("upper", "work", "root"):
            os.mkdir(os.path.join(self.base, d))
        self.upper = os.path.join(self.base, "upper")
        self.path = os.path.join(self.base, "root")
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        "lowerdir=/,upperdir=%s,workdir=%s" % (self.upper, os.path.join(self.base, "work")),
                        self.path], check=True)
        subprocess.run(["mount", "-t", "proc", "proc", self.at("/proc")], check=True)
        subprocess.run(["mount", "--rbind", "/dev", self.at("/dev")], check=True)
        subprocess.run(["mount", "-t", "sysfs", "sysfs", self.at("/sys")], check=True)
        for d in ("/run", "/tmp"):
            subprocess.run(["mount", "-t", "tmpfs", "tmpfs", self.at(d)], check=True)
        os.chmod(self.at("/tmp"), 0o1777)
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

    def at(self, path):
        return os.path.join(self.path, path.lstrip("/"))

    def enter(self):
        """The argv prefix that runs a command in the root: pivot_root in a mount namespace of its
        own, not chroot, since the kernel refuses user namespaces (bubblewrap's sandbox) to a
        chrooted process."""
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                'cd "$0" && pivot_root . mnt && umount -l /mnt && cd / && exec "$@"', self.path]

    def run(self, argv, user=None, env=None, check=True, timeout=300, stdin=None):
        """Runs argv in the root (as `user` when given: a login-like environment, no RUNSNACK_HOME)."""
        cmd = self.enter()
        if user:
            cmd += ["runuser", "-u", user, "--"]
        full_env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                    "HOME": "/root" if not user else "/home/" + user}
        full_env.update(env or {})
        r = subprocess.run(cmd + list(argv), env=full_env, capture_output=True, text=True, timeout=timeout,
                           input=stdin)
        if check and r.returncode != 0:
            raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(argv), r.returncode, r.stdout, r.stderr))
        return r

    def changes(self):
        """Paths (as seen in the root) that the overlay holds: created, changed or deleted."""
        out = []
        for dirpath, dirnames, filenames in os.walk(self.upper):
            for name in dirnames + filenames:
                full = os.path.join(dirpath, name)
                out.append("/" + os.path.relpath(full, self.upper))
        return out

    # ---- units -------------------------------------------------------------------------------

    def unit(self, name):
        """The [Service] settings of an installed unit: {key: [values]}."""
        path = self.at("/lib/systemd/system/" + name)
        settings = {}
        section = None
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("["):
                    section = line
                    continue
                if section == "[Service]" and "=" in line:
                    key, value = line.split("=", 1)
                    settings.setdefault(key, []).append(value)
        return settings

    def _environment_file(self, spec, instance):
        optional = spec.startswith("-")
        path = spec.lstrip("-").replace("%i", instance or "")
        env = {}
        try:
            with open(self.at(path)) as f:
                for line in f:
                    line = line.strip()
                    if not line or line.startswith("#") or "=" not in line:
                        continue
                    key, value = line.split("=", 1)
                    env[key.strip()] = shlex.split(value)[0] if value.strip() else ""
        except FileNotFoundError:
            if not optional:
                raise
        return env

    def start_unit(self, name, instance=None, stdout=None, log=None):
        """Starts the unit's ExecStart by hand, as systemd would (see the module's comment)."""
        s = self.unit(name)
        user = s["User"][0]
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
               "USER": user, "LOGNAME": user, "HOME": "/var/lib/runsnack", "SHELL": "/usr/sbin/nologin"}
        for spec in s.get("Environment", []):
            for item in shlex.split(spec.replace("%i", instance or "")):
                key, value = item.split("=", 1)
                env[key] = value
        for spec in s.get("EnvironmentFile", []):
            env.update(self._environment_file(spec, instance))
        argv = []
        for word in shlex.split(s["ExecStart"][0].replace("%i", instance or "")):
            m = re.fullmatch(r"\$(\w+)|\$\{(\w+)\}", word)
            if m and m.group(1):
                argv += env.get(m.group(1), "").split()  # $VAR: split on white space, as systemd does
            elif m:
                argv.append(env.get(m.group(2), ""))
            else:
                argv.append(word)
        setup = ["mount --make-rprivate /"]
        for rw in s.get("ReadWritePaths", []):
            for p in rw.split():
                setup.append("mount --bind %s %s" % (shlex.quote(p), shlex.quote(p)))
        setup.append("mount -o remount,bind,ro /")  # ProtectSystem=strict: all but the bind mounts above,
        setup.append("mount -o remount,bind,ro /run")  # ... and /run (API file systems /dev, /proc, /sys stay)
        for d in ("/home", "/root", "/run/user"):  # ProtectHome=yes
            setup.append("{ [ ! -d %s ] || mount -t tmpfs -o ro,mode=0755 tmpfs %s; }" % (d, d))
        for d in ("/tmp", "/var/tmp"):  # PrivateTmp=yes
            setup.append("mount -t tmpfs -o mode=1777 tmpfs %s" % d)
        umask = s.get("UMask", ["0022"])[0]
        nnp = ["--no-new-privs"] if s.get("NoNewPrivileges", ["no"])[0] == "yes" else []
        drop = ["setpriv", "--reuid=" + user, "--regid=" + s.get("Group", [user])[0], "--init-groups"] + nnp + \
               ["--inh-caps=-all", "--bounding-set=-all", "--", "env", "-i"] + \
               ["%s=%s" % kv for kv in sorted(env.items())] + argv
        script = " && ".join(setup) + " && umask %s && exec %s" % (umask, " ".join(shlex.quote(a) for a in drop))
        cmd = self.enter() + ["sh", "-c", script]
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=stdout or log, stderr=log,
                                env={"PATH": env["PATH"]})

    def close(self):
        subprocess.run(["umount", "-R", self.path], check=False)
        subprocess.run(["umount", self.base], check=False)
        os.rmdir(self.base)
