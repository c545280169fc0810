"""A Redis or PostgreSQL server of one test's own, to kill, freeze, restart or reconfigure at will.

The servers every test shares (6379, 5432) are never frozen, killed or reconfigured: a test that
does that to its store starts one of these.  Each binds to a free port of 127.0.0.1, keeps its
files in a directory of its own, runs in a process group of its own (:meth:`OwnServer.freeze`
stops all of it, PostgreSQL's backends included, which leave that group: as a host that stalls
would), gets SIGKILL when the test process dies however it dies
(``PR_SET_PDEATHSIG``, Linux), and is killed when the ``with`` block ends.  Without the server's
program the test skips, and fails under ``CI=true``.  PostgreSQL refuses to run as root: under
root it runs as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, TypeVar

import attrs
import pytest
import redis

_PR_SET_PDEATHSIG = 1
_START_LIMIT = 30.0  # a guard against a hang, not a speed requirement
_LOWEST_PORT = 20000
"""The lowest port :func:`free_port` gives: above the well-known ports of the machine's own
services, below the kernel's ephemeral range."""


def program(name: str) -> str:
    """The path of the program ``name``; skips the test without it (fails it under CI=true).

    Looked for on PATH, then among PostgreSQL's programs where Debian installs them
    (``/usr/lib/postgresql/<version>/bin``, the newest first), which are not on PATH.
    """
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
        reverse=True,
    )
    search = os.pathsep.join([os.environ.get("PATH", os.defpath), *map(str, versions)])
    found = shutil.which(name, path=search)
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{name} is not installed; CI=true requires it")
        pytest.skip(f"{name} is not installed")
    return found


def _ports() -> Iterator[int]:
    """This test process's ports for servers, endlessly: a slice of its own of the ports below
    the kernel's ephemeral range, from a random place in it.

    A port from ``bind(0)`` is an ephemeral one, which the kernel also gives to the suite's
    outgoing connections: one could take it between the choice and the server's own bind (a
    Sentinel was seen to fail so, ``Address already in use``).  Below that range only servers
    that name their port bind; each test worker has its own slice, so no two pick the same one.
    """
    try:
        first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768
    low = _LOWEST_PORT
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    size = max(1, (first_ephemeral - low) // max(1, workers))
    start = low + (worker % max(1, workers)) * size
    offset = random.randrange(size)
    while True:
        for k in range(size):
            yield start + (offset + k) % size


_PORT_SOURCE = _ports()


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now, and that no outgoing connection of this
    machine's will take (:func:`_ports`)."""
    for port in _PORT_SOURCE:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("unreachable: the port source is endless")


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the test process dies, however it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class OwnServer:
    """One server process group on ``port``; :meth:`start` runs it again after :meth:`kill`."""

    def __init__(self, command: list[str], port: int, url: str, user: str | None = None) -> None:
        self.command = command
        self.port = port
        self.url = url
        """What the test's clients connect to."""
        self.user = user
        self.process: subprocess.Popen[bytes] | None = None
        self.frozen = False

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=self.user,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only sets the death signal; the child is single-threaded
        )
        deadline = time.monotonic() + _START_LIMIT
        # Ready and still running: what answers on the port could be another program's.
        while not self.ready() or self.process.poll() is not None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.command[0]} did not start:\n{self.log()}")
            time.sleep(0.05)

    def ready(self) -> bool:
        """Whether the server answers (here: listens on its port)."""
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def log(self) -> str:
        return ""

    def freeze(self) -> None:
        """SIGSTOP to the whole group, then to each child that left it: the server holds its
        connections and answers nothing.  (PostgreSQL's backends each make a session of their
        own with ``setsid()``; with the postmaster stopped first, no new one is forked.)"""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGSTOP)
        for child in _children(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        assert self.process is not None
        for child in _children(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGCONT)
        os.killpg(self.process.pid, signal.SIGCONT)
        self.frozen = False

    def kill(self) -> None:
        """SIGKILL to the whole group, then to each child that left it (as :meth:`freeze`):
        the server dies at once, writing nothing more (what the OS has stays).  A PostgreSQL
        backend left alive would answer a query on its connection until it noticed."""
        if self.process is None or self.process.returncode is not None:
            return
        if self.frozen:
            self.thaw()
        children = _children(self.process.pid)  # read first: once orphaned, init adopts them
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        self.process.wait()


class OwnPostgres(OwnServer):
    """A PostgreSQL server, ready once it accepts connections (``pg_isready``), not merely
    listening: one that is still starting up refuses them."""

    def ready(self) -> bool:
        probe = subprocess.run(
            [program("pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port), "-t", "1"],
            check=False,
        )
        return probe.returncode == 0


class TestCertificates:
    """A certificate authority made for one test, and a server certificate it signed for
    127.0.0.1 and localhost (``openssl``): what a client is told to trust, and what a server
    presents."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.ca = directory / "ca.crt"
        self.cert = directory / "server.crt"
        self.key = directory / "server.key"
        openssl = program("openssl")
        ca_key = directory / "ca.key"
        request = directory / "server.csr"
        names = directory / "names.ext"
        names.write_text("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
        new_key = ("-newkey", "rsa:2048", "-nodes")
        steps = [
            [openssl, "req", "-x509", *new_key, "-days", "2", "-keyout", str(ca_key), "-out"],
            [openssl, "req", *new_key, "-keyout", str(self.key), "-out", str(request)],
            [openssl, "x509", "-req", "-in", str(request), "-CA", str(self.ca), "-CAkey"],
        ]
        steps[0] += [str(self.ca), "-subj", "/CN=test CA"]
        steps[1] += ["-subj", "/CN=127.0.0.1"]
        steps[2] += [str(ca_key), "-CAcreateserial", "-days", "2", "-out", str(self.cert)]
        steps[2] += ["-extfile", str(names)]
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        for path in (self.key, ca_key):
            path.chmod(0o644)  # readable by a server that runs as another user


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux: read from ``/proc``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[1]) == pid:  # after the name: state, then the parent's id
            found.append(int(stat.parent.name))
    return found


class OwnRedis(OwnServer):
    """``redis-server`` in ``directory``, RDB snapshots off; with ``appendfsync``, the
    append-only file on with that policy (the only thing that persists), else nothing saved.
    With ``tls``, it listens for TLS only (``url`` is ``rediss://`` and trusts the test's CA)."""

    def __init__(
        self,
        directory: Path,
        appendfsync: str | None = None,
        extra: tuple[str, ...] = (),
        tls: TestCertificates | None = None,
    ) -> None:
        port = free_port()
        aof = ("--appendonly", "yes", "--appendfsync", appendfsync) if appendfsync else ()
        listen: tuple[str, ...] = ("--port", str(port))
        url = f"redis://127.0.0.1:{port}/0"
        if tls is not None:
            listen = ("--port", "0", "--tls-port", str(port), "--tls-auth-clients", "no")
            listen += ("--tls-cert-file", str(tls.cert), "--tls-key-file", str(tls.key))
            listen += ("--tls-ca-cert-file", str(tls.ca))
            url = f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={tls.ca}"
        command = [
            *(program("redis-server"), *listen, "--bind", "127.0.0.1"),
            *("--dir", str(directory), "--save", ""),
            *aof,
            *("--logfile", str(directory / "redis.log")),
            *extra,  # as on redis-server's command line: "--replicaof", HOST, PORT...
        ]
        super().__init__(command, port, url)
        self.directory = directory

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        super().start()

    def ready(self) -> bool:
        """Answers PING, done loading its append-only file."""
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except (redis.BusyLoadingError, redis.ConnectionError):
            return False
        finally:
            client.close()

    def log(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def aof_files(self) -> list[Path]:
        """The append-only files (Redis 7: ``appendonlydir/*.aof``; the last is the one
        written to)."""
        return sorted((self.directory / "appendonlydir").glob("*.incr.aof"))

    def aof_bytes(self) -> bytes:
        return b"".join(path.read_bytes() for path in self.aof_files())

    def cut_aof(self, size: int) -> None:
        """Cut the append-only file being written back to ``size`` bytes, as a crash of the host
        leaves it when the last writes were not fsynced, and let ``redis-check-aof --fix`` drop a
        command cut in two.  The server must be killed first."""
        assert self.process is None or self.process.poll() is not None, "kill the server first"
        *_, aof = self.aof_files()
        with aof.open("r+b") as file:
            file.truncate(size)
        fixed = subprocess.run(
            [program("redis-check-aof"), "--fix", str(aof)],
            input=b"y\n",
            capture_output=True,
            check=False,
        )
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr


class _Startable(Protocol):
    def start(self) -> None: ...
    def kill(self) -> None: ...


S = TypeVar("S", bound=_Startable)


@contextlib.contextmanager
def running(server: S) -> Iterator[S]:
    """``server`` started for the block and killed at its end, however the block (or the start)
    ends."""
    try:
        server.start()
        yield server
    finally:
        server.kill()


@contextlib.contextmanager
def own_redis(
    directory: Path | None = None,
    appendfsync: str | None = None,
    extra: tuple[str, ...] = (),
    tls: TestCertificates | None = None,
) -> Iterator[OwnRedis]:
    """A started :class:`OwnRedis` (in a temporary directory unless given one), killed at the
    end of the block."""
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="own-redis-")))
        yield stack.enter_context(running(OwnRedis(directory, appendfsync, extra, tls)))


@attrs.frozen
class Certificates:
    """A CA of the test's own and a server certificate it signed for ``localhost`` and
    ``127.0.0.1`` (PEM files; the key readable by its owner only)."""

    ca: Path
    cert: Path
    key: Path


def make_certificates(directory: Path) -> Certificates:
    """A new CA and server certificate in ``directory`` (made with the ``openssl`` program)."""
    openssl = program("openssl")
    ca, ca_key = directory / "ca.crt", directory / "ca.key"
    cert, key, request = (
        directory / "server.crt",
        directory / "server.key",
        directory / "server.csr",
    )
    new_key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    for command in (
        [
            *(openssl, "req", "-x509", *new_key, "-keyout", str(ca_key), "-out", str(ca)),
            *("-days", "2", "-subj", "/CN=asyncsdk test CA"),
            *("-addext", "basicConstraints=critical,CA:TRUE"),
            *("-addext", "keyUsage=critical,keyCertSign,cRLSign"),
        ],
        [
            *(openssl, "req", *new_key, "-keyout", str(key), "-out", str(request)),
            *("-subj", "/CN=localhost"),
        ],
        [
            *(openssl, "x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key)),
            *("-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", "/dev/stdin"),
        ],
    ):
        subprocess.run(
            command,
            input=b"subjectAltName=DNS:localhost,IP:127.0.0.1\n",
            check=True,
            capture_output=True,
        )
    key.chmod(0o600)
    return Certificates(ca=ca, cert=cert, key=key)


@contextlib.contextmanager
def own_postgres(
    password: str | None = None,
    certificates: Certificates | None = None,
    settings: tuple[str, ...] = (),
) -> Iterator[OwnServer]:
    """A started PostgreSQL cluster made by initdb (user ``postgres``, database ``postgres``),
    without fsync (nothing here survives the test), killed at the end of the block.

    Trust auth, unless given a ``password``: then connections over TCP must log in with it
    (SCRAM-SHA-256), and the server's ``url`` carries it.  With ``certificates`` (from
    :func:`make_certificates`) the server also takes TLS with them.  ``settings``: more
    ``name=value`` settings, as ``postgres -c`` takes them.  The server takes replication
    connections (a standby: :func:`own_standby`)."""
    initdb, postgres = program("initdb"), program("postgres")
    user = "postgres" if os.geteuid() == 0 else None
    directory = tempfile.mkdtemp(prefix="own-postgres-")
    try:
        entry = pwd.getpwnam(user) if user is not None else None
        auth = ["-A", "trust"]
        if password is not None:
            secret = Path(directory) / "password"
            secret.write_text(password + "\n")
            auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={secret}"]
        tls: list[str] = []
        if certificates is not None:  # copied where the server's user can read them
            cert, key = Path(directory) / "server.crt", Path(directory) / "server.key"
            shutil.copyfile(certificates.cert, cert)
            shutil.copyfile(certificates.key, key)
            key.chmod(0o600)
            tls = ["-c", "ssl=on", "-c", f"ssl_cert_file={cert}", "-c", f"ssl_key_file={key}"]
        if entry is not None:
            for path in (Path(directory), *Path(directory).iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        data = str(Path(directory) / "data")
        subprocess.run(
            [initdb, "-D", data, *auth, "-U", "postgres", "--no-sync", "-E", "UTF8"],
            check=True,
            stdout=subprocess.DEVNULL,
            user=user,
        )
        port = free_port()
        login = "postgres" if password is None else f"postgres:{password}"
        server = OwnPostgres(
            [
                *(postgres, "-D", data, "-p", str(port), "-k", directory),
                *("-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", *tls),
                *(part for setting in settings for part in ("-c", setting)),
            ],
            port,
            f"postgresql://{login}@127.0.0.1:{port}/postgres",
            user=user,
        )
        with running(server):
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def own_pgbouncer(target: str, pool_mode: str, pool_size: int) -> Iterator[OwnServer]:
    """A started PgBouncer of the test's own in front of the PostgreSQL at ``target`` (a
    ``postgresql://user@host:port/database`` URL), in ``pool_mode`` (``transaction`` or
    ``session``), with trust auth and ``pool_size`` server connections at most (idle ones closed
    after 10 s); killed at the end of the block.  Its ``url`` names the same user and database
    through PgBouncer.  PgBouncer refuses to run as root: under root it runs as the ``postgres``
    user."""
    import yarl

    pgbouncer = program("pgbouncer")
    url = yarl.URL(target)
    user = "postgres" if os.geteuid() == 0 else None
    database = url.path.lstrip("/")
    directory = Path(tempfile.mkdtemp(prefix="own-pgbouncer-"))
    try:
        port = free_port()
        (directory / "userlist.txt").write_text(f'"{url.user}" ""\n')
        (directory / "pgbouncer.ini").write_text(
            f"[databases]\n{database} = host={url.host} port={url.port} dbname={database}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {directory / 'userlist.txt'}\n"
            f"pool_mode = {pool_mode}\ndefault_pool_size = {pool_size}\nmax_client_conn = 500\n"
            "server_idle_timeout = 10\n"
            f"logfile = {directory / 'pgbouncer.log'}\n"
            f"pidfile = {directory / 'pgbouncer.pid'}\n"
        )
        if user is not None:
            entry = pwd.getpwnam(user)
            for path in (directory, *directory.iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        server = OwnServer(
            [pgbouncer, str(directory / "pgbouncer.ini")],
            port,
            f"postgresql://{url.user}@127.0.0.1:{port}/{database}",
            user=user,
        )
        with running(server):
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def own_standby(primary: OwnServer) -> Iterator[OwnServer]:
    """A started streaming standby of ``primary`` (a trust-auth :func:`own_postgres`), made by
    ``pg_basebackup``, in hot standby, named ``standby`` to the primary; killed at the end of the
    block.  Promote it with ``SELECT pg_promote()``."""
    basebackup, postgres = program("pg_basebackup"), program("postgres")
    user = "postgres" if os.geteuid() == 0 else None
    directory = tempfile.mkdtemp(prefix="own-standby-")
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(directory, entry.pw_uid, entry.pw_gid)
        data = str(Path(directory) / "data")
        subprocess.run(
            [
                *(basebackup, "-D", data, "-h", "127.0.0.1", "-p", str(primary.port)),
                *("-U", "postgres", "-X", "stream", "-R", "--no-sync"),
                *(
                    "-d",
                    f"host=127.0.0.1 port={primary.port} user=postgres application_name=standby",
                ),
            ],
            check=True,
            capture_output=True,
            user=user,
        )
        port = free_port()
        server = OwnPostgres(
            [
                *(postgres, "-D", data, "-p", str(port), "-k", directory),
                *("-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "hot_standby=on"),
            ],
            port,
            f"postgresql://postgres@127.0.0.1:{port}/postgres",
            user=user,
        )
        with running(server):
            yield server
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class SentinelGroup:
    """A primary, one replica and three Redis Sentinels watching them (quorum 2, a primary
    counted down after ``down_after_ms``, 0.5 s by default), each a process of its own under
    ``directory``; ``url`` is the ``redis+sentinel://`` URL of the group, ``primary`` and
    ``replica`` the servers as started (after a failover, :meth:`primary_port` says which one
    leads)."""

    SERVICE = "mymaster"

    def __init__(
        self, directory: Path, appendfsync: str | None = None, down_after_ms: int = 500
    ) -> None:
        self.directory = directory
        self.primary = OwnRedis(directory / "a", appendfsync)
        follow = ("--replicaof", "127.0.0.1", str(self.primary.port))
        self.replica = OwnRedis(directory / "b", appendfsync, follow)
        self.sentinels: list[OwnServer] = []
        for n in range(3):
            port = free_port()
            folder = directory / f"sentinel-{n}"
            folder.mkdir(parents=True)
            config = folder / "sentinel.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {folder}\nlogfile {folder / 'log'}\n"
                f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {self.SERVICE} {down_after_ms}\n"
                f"sentinel failover-timeout {self.SERVICE} 5000\n"
            )
            command = [program("redis-server"), str(config), "--sentinel"]
            self.sentinels.append(OwnServer(command, port, f"redis://127.0.0.1:{port}"))
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        self.url = f"redis+sentinel://{hosts}/{self.SERVICE}/0"

    def start(self) -> None:
        """Start every process; return once each Sentinel knows the replica and the others."""
        for server in (self.primary, self.replica, *self.sentinels):
            server.start()
        deadline = time.monotonic() + _START_LIMIT
        while not self._watching():
            if time.monotonic() > deadline:
                raise AssertionError("the Sentinels did not find each other and the replica")
            time.sleep(0.1)

    def _watching(self) -> bool:
        for sentinel in self.sentinels:
            client = redis.Redis(
                port=sentinel.port, socket_connect_timeout=1, decode_responses=True
            )
            try:
                replicas = client.execute_command("SENTINEL", "REPLICAS", self.SERVICE)
                others = client.execute_command("SENTINEL", "SENTINELS", self.SERVICE)
            except redis.RedisError:
                return False
            finally:
                client.close()
            if len(replicas) < 1 or len(others) < 2:
                return False
        return True

    def primary_port(self, sentinel: int = 0) -> int | None:
        """The port of the primary that Sentinel ``sentinel`` (the first by default) names now."""
        client = redis.Redis(port=self.sentinels[sentinel].port, socket_connect_timeout=1)
        try:
            _, port = client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.SERVICE)
            return int(port)
        except (redis.RedisError, TypeError, ValueError):
            return None
        finally:
            client.close()

    def kill(self) -> None:
        for server in (*self.sentinels, self.replica, self.primary):
            server.kill()


@contextlib.contextmanager
def sentinel_group(
    directory: Path, appendfsync: str | None = None, down_after_ms: int = 500
) -> Iterator[SentinelGroup]:
    """A started :class:`SentinelGroup`, every process killed at the end of the block."""
    with running(SentinelGroup(directory, appendfsync, down_after_ms)) as group:
        yield group
