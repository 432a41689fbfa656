"""A python ``keyring`` backend that keeps passwords in kc, the Linux kernel's keyrings.

Every call runs the ``kc`` executable (``$KC_BIN``, else ``kc`` on ``PATH``).
Passwords travel on kc's standard input and output, never in its arguments, and are
stored as their exact UTF-8 bytes, so ``kc get SERVICE USERNAME`` prints what
``keyring.set_password(SERVICE, USERNAME, ...)`` stored and the other way round.

keyring's service and username become kc's service and item. kc names are 1-255
bytes without ``/`` or NUL, and not ``.`` or ``..``; keyring's are any text (pip and
twine use URLs as services), so a name is escaped, exactly and reversibly:

- ``%``, ``/`` and NUL become ``%25``, ``%2F`` and ``%00``; every other character is
  its UTF-8 bytes, unchanged;
- the whole names ``.`` and ``..`` become ``%2E`` and ``%2E%2E``;
- the empty name becomes ``%`` alone (which no other name escapes to).

A name that needs none of this (``com.example``, ``alice``) is the kc name itself.
A name longer than 255 bytes once escaped cannot be stored, and says so.

Set ``KEYRING_PROPERTY_ACCESS`` (``when-unlocked``, the default; ``after-first-unlock``;
``always``) and ``KEYRING_PROPERTY_TIMEOUT`` (``8h``) to choose where new passwords are
kept and for how long, as ``kc set --access`` and ``--timeout`` do.
"""

import json
import os
import shutil
import subprocess

from keyring.backend import KeyringBackend
from keyring.credentials import SimpleCredential
from keyring.errors import KeyringError, KeyringLocked, PasswordDeleteError, PasswordSetError

__all__ = ["Keyring", "escape_name", "unescape_name"]

# The bytes kc cannot hold in a name, escaped as %XX (with % itself).
_ESCAPED_BYTES = frozenset(b"%/\0")
_EMPTY_NAME = b"%"
_MAX_NAME_BYTES = 255


def escape_name(text):
    """The kc name (bytes) for a keyring service or username (text).

    Raises ValueError if the text cannot become a kc name (over 255 bytes escaped,
    or a lone surrogate that has no UTF-8).
    """
    if text == "":
        return _EMPTY_NAME
    if text in (".", ".."):
        return b"%2E" * len(text)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{text!r} is not valid Unicode text: {error.reason}") from None
    escaped = bytearray()
    for byte in raw:
        if byte in _ESCAPED_BYTES:
            escaped += b"%%%02X" % byte
        else:
            escaped.append(byte)
    if len(escaped) > _MAX_NAME_BYTES:
        raise ValueError(
            f"{text!r} is {len(escaped)} bytes long as a kc name; kc names are at most 255 bytes"
        )
    return bytes(escaped)


def unescape_name(name):
    """The keyring text a kc name (bytes) stands for, or None if escape_name never
    makes that name (an item stored through kc itself, such as ``100%``)."""
    if name == _EMPTY_NAME:
        return ""
    raw = bytearray()
    index = 0
    while index < len(name):
        byte = name[index]
        if byte == 0x25:  # %
            digits = name[index + 1:index + 3]
            try:
                raw.append(int(digits, 16))
            except ValueError:
                return None
            index += 3
        else:
            raw.append(byte)
            index += 1
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Only the one spelling escape_name produces stands for the text.
    try:
        return text if escape_name(text) == bytes(name) else None
    except ValueError:
        return None


class _ClassProperty:
    """A read-only property of the class itself (keyring reads ``Keyring.priority``)."""

    def __init__(self, getter):
        self.getter = getter
        self.__doc__ = getter.__doc__

    def __get__(self, instance, owner):
        return self.getter(owner)


def _kc_executable():
    """``$KC_BIN``, else ``kc`` on PATH; None if neither is there."""
    configured = os.environ.get("KC_BIN")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("kc")


_probed = {}


def _session_bus_reachable():
    """Whether a D-Bus session bus is named here, where the Secret Service backends can work.

    keyring's libsecret backend calls itself viable (priority 4.8) wherever its library
    imports, bus or no bus, and then fails at the first call; without a bus kc must come
    first (5.1). With one, kc stays below the desktop stores (3); there kc-secretd, when
    it owns the Secret Service, brings those stores' calls to kc anyway.
    """
    if os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return True
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return bool(runtime) and os.path.exists(os.path.join(runtime, "bus"))


def _probe(executable):
    """None if kc runs and the kernel's keyrings work for it here, else why not.

    ``kc ls`` lists the services: a few keyring system calls, the same ones every
    other call needs. Where seccomp blocks them (a default docker or podman profile)
    or the kernel lacks them, it fails and says so. Asked once per process.
    """
    if executable not in _probed:
        try:
            result = subprocess.run([executable, "ls"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as error:
            _probed[executable] = f"{executable} cannot run: {error.strerror}"
        else:
            _probed[executable] = None if result.returncode == 0 else (
                _first_line(result.stderr) or f"{executable} ls exited {result.returncode}")
    return _probed[executable]


def _first_line(stderr):
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines else ""


class Keyring(KeyringBackend):
    """Passwords in the Linux kernel's keyrings, through kc.

    Priority 3: the default where no desktop secret store answers on D-Bus (a server,
    a container, an ssh session), and below them where one does (SecretService 5,
    KWallet 4.9, libsecret 4.8), whose login keyring outlives a reboot as kc's
    keyrings do only with a vault. Above keyrings.alt's files and keyring's threshold
    for a recommended backend (1). Where several backends are viable, keyring's
    chainer still reads passwords from kc after the desktop's store.
    """

    #: ``kc set --access``: when-unlocked (kc's default), after-first-unlock, always.
    access = None
    #: ``kc set --timeout``: the kernel forgets the password after this long (``8h``).
    timeout = None

    @_ClassProperty
    def priority(cls):
        executable = _kc_executable()
        if executable is None:
            where = os.environ.get("KC_BIN")
            raise RuntimeError(f"KC_BIN={where} is not an executable" if where
                               else "kc is not on PATH (set KC_BIN to its path)")
        problem = _probe(executable)
        if problem:
            raise RuntimeError(problem)
        return 3 if _session_bus_reachable() else 5.1

    def get_password(self, service, username):
        result = self._run("get", "-q", service, username, error=KeyringError)
        if result.returncode == 1:
            if result.stderr.strip():  # a vault holds it but is locked
                raise KeyringLocked(_first_line(result.stderr))
            return None
        self._check(result, KeyringError)
        try:
            return result.stdout.decode("utf-8")
        except UnicodeDecodeError:
            raise KeyringError(
                f"the value of {username!r} in {service!r} is not UTF-8 text; read it with kc get"
            ) from None

    def set_password(self, service, username, password):
        try:
            value = password.encode("utf-8")
        except UnicodeEncodeError as error:
            raise PasswordSetError(f"the password is not valid Unicode text: {error.reason}") from None
        options = []
        if self.access:
            options += ["--access", str(self.access)]
        if self.timeout:
            options += ["--timeout", str(self.timeout)]
        result = self._run("set", *options, service, username, error=PasswordSetError, value=value)
        self._check(result, PasswordSetError)

    def delete_password(self, service, username):
        result = self._run("rm", service, username, error=PasswordDeleteError)
        if result.returncode == 1:
            raise PasswordDeleteError(f"no password for {username!r} in {service!r}")
        self._check(result, PasswordDeleteError)

    def get_credential(self, service, username):
        """The credential of ``username``; without one, of the first username
        (in kc's order) that has a password in ``service``."""
        if username is not None:
            return super().get_credential(service, username)
        for name in self._usernames(service):
            password = self.get_password(service, name)
            if password is not None:
                return SimpleCredential(name, password)
        return None

    def _usernames(self, service):
        result = self._run_raw(["ls", "--json", "--", self._name(service, KeyringError)], KeyringError)
        if result.returncode == 1:
            return []
        self._check(result, KeyringError)
        names = []
        for item in json.loads(result.stdout).get("items", []):
            # A name that is not UTF-8 comes exactly in nameBase64; none of ours.
            if "nameBase64" in item:
                continue
            text = unescape_name(item["name"].encode("utf-8"))
            if text is not None:
                names.append(text)
        return names

    # Running kc.

    def _run(self, command, *arguments, error, value=None):
        """Runs ``kc COMMAND [OPTIONS] -- SERVICE USERNAME`` with the names escaped."""
        *options, service, username = arguments
        names = [self._name(service, error), self._name(username, error)]
        return self._run_raw([command, *options, "--", *names], error, value)

    @staticmethod
    def _name(text, error):
        try:
            return escape_name(text)
        except ValueError as problem:
            raise error(str(problem)) from None

    @staticmethod
    def _run_raw(arguments, error, value=None):
        executable = _kc_executable()
        if executable is None:
            where = os.environ.get("KC_BIN")
            raise error(f"KC_BIN={where} is not an executable" if where
                        else "kc is not on PATH (set KC_BIN to its path)")
        try:
            return subprocess.run([executable, *arguments], input=value if value is not None else b"",
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as problem:
            raise error(f"{executable} cannot run: {problem.strerror}") from None

    @staticmethod
    def _check(result, error):
        if result.returncode != 0:
            raise error(_first_line(result.stderr) or f"kc exited {result.returncode}")
