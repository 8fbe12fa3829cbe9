#!/usr/bin/env python3
"""mini_device: a small securepush device client, the fixture of the client conformance tests.

A TEST FIXTURE, not a product. It speaks the device side of protocol/SPEC.md (frames, HELLO,
PUSH / DELIVERY_ACK, FETCH, SYNC, ACK, MISSED, GOAWAY, keepalive, reconnect backoff) and meets
Appendix B.2 of the client contract. With `--fault NAME` it misbehaves in exactly one way, so
that exactly one case of the device conformance list fails (`--list-faults` prints them).

    python3 mini_device.py --gateway HOST:PORT --store HOST:PORT --credential FILE \\
        --state DIR --device ID --user NAME [--fault NAME]

stdout carries only `SHOWN <id> PAYLOAD <hex>` and `SHOWN <id> GENERIC` lines; the rest goes
to stderr. Python 3.11, standard library only.
"""

import signal

STOP = []   # SIGTERM or SIGINT seen; installed before anything else, so an early one also exits 0
if __name__ == "__main__":
    for _sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(_sig, lambda *_: STOP.append(True))

import argparse  # noqa: E402 (after the handlers on purpose)
import errno
import os
import random
import selectors
import socket
import struct
import sys
import time

# ---------------------------------------------------------------------------------------
# Faults: each makes one case of the device case list fail (the case id is in the text).

FAULTS = {
    "early-request": "dev.hello.first: sends a PING to the gateway right after HELLO, before HELLO_OK",
    "no-credential": "dev.hello.credential: started without a token, sends its first gateway HELLO without the credential",
    "big-hello": "dev.hello.size: pads its first gateway HELLO with an unknown field to 1100 bytes",
    "flags": "dev.frame.header: sets flags bit 0x01 on PONG",
    "field-order": "dev.field.order: writes FETCH fields in descending tag order",
    "padded-length": "dev.field.varint: writes the length of FETCH's id field in two bytes (90 00)",
    "reuse-correlation": "dev.correlation.unique: uses correlation 7 for every FETCH",
    "match-in-order": "dev.correlation.match: pairs replies with requests by order of arrival",
    "no-pong": "dev.ping.pong: never answers PING",
    "no-keepalive": "dev.keepalive.ping: never sends a keepalive PING",
    "delivery-ack-hex-id": "dev.push.delivery-ack: puts the id in DELIVERY_ACK as hex text, not its bytes",
    "stdout-noise": "dev.push.fetch-show: prints a line of its own on stdout after each payload shown",
    "show-twice": "dev.push.repeat: fetches and shows again an id this run showed when a PUSH repeats it",
    "strict-push": "dev.push.ignore-fields: refuses a PUSH carrying target_kind, target, ttl_s, user or once",
    "strict-fields": "dev.field.unknown: refuses unknown tags in every message",
    "ack-before-show": "dev.ack.after-show: ACKs on FETCH_OK and shows the content 300 ms later",
    "ack-hex-token": "dev.ack.sent: puts the token in ACK as hex text, not its bytes",
    "delivery-ack-needs-token": "dev.generic.no-token: sends DELIVERY_ACK only while it has a token",
    "expired-retry": "dev.generic.expired: on TOKEN_EXPIRED retries FETCH with the same token, shows nothing",
    "bad-token-ack": "dev.generic.bad-token: ACKs an id whose FETCH got BAD_TOKEN",
    "generic-every-time": "dev.generic.once: shows the generic notification every time",
    "forget-generic": "dev.relogin.fetch: drops ids it showed as generic",
    "sync-before-token": "dev.sync.store-connect: sends its first SYNC before it reads the token, so without it",
    "ignore-missed": "dev.sync.missed: does not SYNC on MISSED",
    "cursor-made": "dev.sync.cursor: pages once with the store's cursor plus one, a cursor of its own making",
    "ignore-inflight": "dev.inflight: sends every queued request regardless of max_inflight",
    "request-after-goaway": "dev.goaway.stop: ignores GOAWAY SHUTTING_DOWN, sending requests until the server closes",
    "no-retry-after-goaway": "dev.goaway.retry: forgets ids whose FETCH a GOAWAY left unprocessed",
    "partial-frame": "dev.reconnect.midframe: keeps a frame cut off by the close and reads the next connection's bytes after it",
    "no-backoff": "dev.reconnect.backoff: a server that closes before answering HELLO is tried again after 10 to 30 ms",
    "no-jitter": "dev.reconnect.jitter: exact doubling from 100 ms",
    "reset-on-connect": "dev.reconnect.hello-refused: a HELLO answered at all (even ERROR) resets the backoff",
    "give-up": "dev.reconnect.comes-back: stops trying the gateway once its attempts have failed for 2.5 s (base 50 ms, no jitter)",
    "busy-generic": "dev.busy.fetch: shows the generic notification on BUSY",
    "busy-immediate": "dev.rate-limited.fetch: retries a RATE_LIMITED FETCH at once",
    "stale-save": "dev.restart.show-once: on SIGTERM rewrites {state} with the ids it read at start, losing this run's",
    "save-on-exit": "dev.restart.kill: writes the shown ids to {state} only when it stops on SIGTERM",
    "close-on-unknown-status": "dev.error.unknown-status: closes the connection on an ERROR of unknown status",
    "stop-on-unknown-goaway": "dev.goaway.unknown-status: stops reconnecting after a GOAWAY of unknown status",
    "close-on-stray": "dev.reply.unknown-correlation: closes the connection on a reply nobody waits for",
    "ignore-unknown-type": "dev.unknown-type: no ERROR UNKNOWN_TYPE for a frame of unknown type",
    "goaway-last-zero": "dev.goaway.last-correlation: its own GOAWAY always carries last_correlation 0",
    "lenient-magic": "dev.frame.bad-magic: does not check the magic byte",
    "read-large": "dev.frame.too-large: reads the body of a frame over the maximum size",
    "first-field": "dev.fetch-ok.both: shows `payload` of a FETCH_OK that carries both payload fields",
    "ack-unsealed": "dev.sealed.not-for-device: ACKs after NOT_SEALED_FOR_DEVICE",
    "error-on-missed": "dev.missed.malformed: answers a malformed MISSED with ERROR",
    "lenient-push": "dev.push.unlisted-field: accepts a PUSH with a field outside PUSH's table (3.4-6)",
    "show-sealed": "dev.sealed.unopenable: shows the bytes of a sealed_payload it cannot open as the content",
    "lenient-version": "dev.frame.version: does not check the version byte of a frame",
    "no-silence-timeout": "dev.keepalive.silent: never closes a connection that has gone silent",
    "no-drain": "dev.goaway.drain: closes at once on GOAWAY SHUTTING_DOWN, giving up on the replies it promised",
    "goaway-stays": "dev.goaway.close: after a GOAWAY of a known status but SHUTTING_DOWN, waits for the server to close",
    "goaway-ok-ignored": "dev.goaway.ok-status: ignores a GOAWAY whose status is OK",
    "close-on-error-ok": "dev.error.ok-status: takes an ERROR whose status is OK as a fatal fault and closes",
    "status-from-text": "dev.error.status-only: reads the status of an ERROR from its message when it names one",
    "unsolicited-error": "dev.error.only-refusals: after each ACK_OK, sends the store an ERROR numbered as a request of its own",
    "lenient-token": "dev.token.malformed: uses a fetch-token file that is not hex as a token, its first word's bytes",
    "lenient-requests": "dev.vector.* and dev.request-error: a request that does not decode gets no ERROR",
    "lenient-header": "dev.vector.*: version, flags, reserved and length are not checked (the magic still is)",
    "ack-gone": "dev.push.gone: ACKs an id whose FETCH was answered GONE",
    "no-sync-on-reconnect": "dev.store.restart: SYNCs on the first store connection only",
    "second-hello": "dev.hello.role: sends a second HELLO, with role 2, on the gateway connection after HELLO_OK",
    "store-credential": "dev.hello.store-credential: sends its registration in the HELLO to the store as well",
    "silent-fatal-close": "dev.frame.goaway-status: closes on a fatal frame without GOAWAY",
    "strict-credential-hex": "dev.credential.file-form: reads the registration file only as lowercase hex on one line",
    "world-readable-state": "dev.state.file-modes: makes its shown-ids file readable by everyone",
    "reconnect-after-revoked": "dev.goaway.revoked: connects again after GOAWAY REVOKED",
}
ACTIVE = set()


def fault(name):
    assert name in FAULTS, name
    return name in ACTIVE


def log(text):
    sys.stderr.write(f"mini_device {time.strftime('%H:%M:%S')} {text}\n")
    sys.stderr.flush()

# ---------------------------------------------------------------------------------------
# Wire codec (SPEC.md 2 and 3)


class M:  # message types (4.1)
    HELLO, HELLO_OK, PING, PONG, GOAWAY, ERROR = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
    FETCH, FETCH_OK, SYNC, SYNC_OK, ACK, ACK_OK = 0x14, 0x15, 0x16, 0x17, 0x18, 0x19
    PUSH, DELIVERY_ACK, MISSED = 0x20, 0x22, 0x23
    KNOWN = set(range(0x01, 0x07)) | set(range(0x10, 0x28))
    # Requests of 4.1; every other known type but GOAWAY and MISSED is a reply.
    REQUESTS = {0x01, 0x03, 0x10, 0x12, 0x14, 0x16, 0x18, 0x1A, 0x1C, 0x1E, 0x20, 0x24, 0x26}
    ONE_WAY = {GOAWAY, MISSED}


class S:  # statuses (6)
    OK, MALFORMED_FRAME, UNSUPPORTED_VERSION, FRAME_TOO_LARGE = 0x00, 0x01, 0x02, 0x03
    UNKNOWN_TYPE, BAD_REQUEST, TIMEOUT = 0x05, 0x06, 0x07
    AUTH_REQUIRED, TOKEN_EXPIRED, BAD_TOKEN, BAD_CREDENTIALS = 0x10, 0x11, 0x12, 0x13
    FORBIDDEN, NOT_FOUND, GONE, RATE_LIMITED, BUSY, SHUTTING_DOWN = 0x14, 0x15, 0x16, 0x19, 0x1A, 0x1B
    NOT_SEALED_FOR_DEVICE, INTERNAL = 0x20, 0xFF
    KNOWN = set(range(0x00, 0x08)) | set(range(0x10, 0x22)) | {0xFF}
    TOKEN = {AUTH_REQUIRED, TOKEN_EXPIRED, BAD_TOKEN}       # generic, keep the id (4.14-4)
    DROP = {FORBIDDEN, NOT_FOUND, GONE}                      # the id is not for us or gone
    RETRY = {BUSY, RATE_LIMITED, INTERNAL}                   # not carried out (5.8-4)
    REPLACED, REVOKED = 0x1C, 0x1E
    INCURABLE = {BAD_CREDENTIALS, UNSUPPORTED_VERSION, REPLACED, REVOKED}   # no retry (5.8-1, 7.4-7)
    # Names as section 6 spells them, for the status-from-text fault only.
    NAMES = {"AUTH_REQUIRED": AUTH_REQUIRED, "TOKEN_EXPIRED": TOKEN_EXPIRED, "BAD_TOKEN": BAD_TOKEN,
             "FORBIDDEN": FORBIDDEN, "NOT_FOUND": NOT_FOUND, "GONE": GONE, "BUSY": BUSY,
             "RATE_LIMITED": RATE_LIMITED, "INTERNAL": INTERNAL}


def status_named(f):
    """The status an ERROR's message starts with (the status-from-text fault), or None."""
    words = ((f or {}).get("message") or "").replace(":", " ").split()
    return S.NAMES.get(words[0]) if words else None


HEADER = struct.Struct(">BBBBIHHI")   # magic, version, type, flags, correlation, status, reserved, length
MAGIC, VERSION = 0xA7, 1
CLIENT_MAX_FRAME = 65536              # our limit before HELLO_OK and our proposal (2-8)

# tag: (name, value type, max length); the tags a device reads or writes (3.2)
TAGS = {
    0x01: ("role", "u8", None), 0x02: ("version_min", "u8", None), 0x03: ("version_max", "u8", None),
    0x04: ("credential", "bytes", 1024), 0x05: ("max_frame", "u32", None),
    0x06: ("keepalive_ms", "u32", None), 0x07: ("max_inflight", "u32", None),
    0x08: ("version", "u8", None), 0x09: ("name", "string", 64), 0x0A: ("message", "string", 1024),
    0x0B: ("last_correlation", "u32", None), 0x10: ("user", "ident", 64),
    0x13: ("token", "bytes", 512), 0x14: ("expires_at", "u64", None), 0x15: ("id", "bytes", 64),
    0x16: ("payload", "bytes", None), 0x17: ("ttl_s", "u32", None), 0x19: ("cursor", "u64", None),
    0x1B: ("ids", "bytes", None), 0x1C: ("has_more", "u8", None), 0x20: ("created_at", "u64", None),
    0x25: ("sealed_payload", "bytes", None), 0x30: ("target_kind", "u8", None),
    0x31: ("target", "ident", 64), 0x32: ("alert", "u8", None), 0x33: ("priority", "u8", None),
    0x34: ("collapse_key", "ident", 64), 0x37: ("missed_count", "u32", None),
    0x3B: ("once", "u8", None), 0x3F: ("older_count", "u32", None),
}
TAG = {name: tag for tag, (name, _, _) in TAGS.items()}
KNOWN_TAGS = set(range(0x01, 0x0C)) | set(range(0x10, 0x27)) | set(range(0x30, 0x40))
WIDTH = {"u8": 1, "u32": 4, "u64": 8}
RANGES = {"has_more": (0, 1), "alert": (0, 1), "priority": (0, 10), "once": (0, 1), "target_kind": (1, 3)}
# The field tables of the messages a device receives: name -> required (4.2 to 4.15).
TABLES = {
    M.HELLO_OK: {"max_frame": 1, "keepalive_ms": 1, "max_inflight": 1, "version": 1, "name": 0},
    M.PING: {}, M.PONG: {},
    M.GOAWAY: {"message": 0, "last_correlation": 1},
    M.ERROR: {"message": 0},
    M.FETCH_OK: {"expires_at": 1, "id": 1, "payload": 0, "created_at": 1, "sealed_payload": 0},
    M.SYNC_OK: {"cursor": 1, "ids": 1, "has_more": 1, "older_count": 0},
    M.ACK_OK: {"id": 1},
    M.PUSH: {"user": 0, "id": 1, "ttl_s": 0, "target_kind": 0, "target": 0, "alert": 0,
             "priority": 0, "collapse_key": 0, "once": 0},
    M.MISSED: {"missed_count": 1},
}
REPLY_OF = {"HELLO": M.HELLO_OK, "PING": M.PONG, "FETCH": M.FETCH_OK, "SYNC": M.SYNC_OK, "ACK": M.ACK_OK}
ZERO_CURSOR = bytes(8)


class Malformed(Exception):
    """A body or header that fails a check of sections 2 and 3 (or a message rule)."""


def varint(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_varint(body, i):
    value = 0
    for k in range(4):                      # at most 4 bytes (3.1-3)
        if i >= len(body):
            raise Malformed("body ends inside a varint")
        byte = body[i]
        i += 1
        value |= (byte & 0x7F) << (7 * k)
        if not byte & 0x80:
            return value, i
    raise Malformed("varint longer than 4 bytes")


def encode(fields, descending=False, padded=()):
    """A body from (name, value) pairs: ints by their tag's width, the rest bytes. The
    lengths of the fields named in `padded` take two bytes (the padded-length fault)."""
    out = []
    for name, value in fields:
        tag, kind = TAG[name], TAGS[TAG[name]][1]
        raw = value.to_bytes(WIDTH[kind], "big") if isinstance(value, int) else bytes(value)
        out.append((tag, raw))
    out.sort(reverse=descending)            # ascending tags (3.4-1), unless a fault says otherwise

    def length(tag, n):
        if TAGS[tag][0] in padded and n < 1 << 14:
            return bytes([0x80 | n & 0x7F, n >> 7])       # 16 as 90 00: valid, but not the fewest (3.1-4)
        return varint(n)
    return b"".join(bytes([tag]) + length(tag, len(raw)) + raw for tag, raw in out)


def frame(ftype, corr, body=b"", status=0, flags=0, reserved=0):
    return HEADER.pack(MAGIC, VERSION, ftype, flags, corr, status, reserved, len(body)) + body


def split_fields(body, lenient=False):
    """(tag, value) pairs of a body (3.1); lenient stops at a cut-off field instead."""
    out, i = [], 0
    while i < len(body):
        try:
            n, j = read_varint(body, i + 1)
            if j + n > len(body):
                raise Malformed("field runs past the end of the body")
        except Malformed:
            if lenient:
                break
            raise
        out.append((body[i], bytes(body[j:j + n])))
        i = j + n
    return out


def value_of(name, kind, maxlen, raw):
    if kind in WIDTH:
        if len(raw) != WIDTH[kind]:
            raise Malformed(f"{name}: {len(raw)} bytes for a {kind}")
        if name == "cursor":
            return raw                      # opaque to the device (4.9-2)
        value = int.from_bytes(raw, "big")
        low, high = RANGES.get(name, (0, value))
        if not low <= value <= high:
            raise Malformed(f"{name} {value} out of range")
        return value
    if maxlen is not None and len(raw) > maxlen:
        raise Malformed(f"{name} longer than {maxlen}")
    if kind == "bytes":
        return raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed(f"{name} is not UTF-8") from None
    if kind == "ident" and any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text):
        raise Malformed(f"{name} holds a control character")
    return text


def decode(ftype, body):
    """The fields of a body by name, checked as 3.3 and 3.4 say, then the message's rules."""
    table, got = TABLES[ftype], {}
    closed = ftype == M.PUSH and not fault("lenient-push")   # 3.4-6
    for tag, raw in split_fields(body):
        name = TAGS[tag][0] if tag in TAGS else None
        if name not in table:
            if closed or (fault("strict-fields") and tag not in KNOWN_TAGS):
                raise Malformed(f"field 0x{tag:02x} not allowed in type 0x{ftype:02x}")
            continue                        # unknown, or known but not here: skipped (3.4-2, 3.4-3)
        if name in got:
            raise Malformed(f"{name} twice")
        got[name] = value_of(name, TAGS[tag][1], TAGS[tag][2], raw)
    missing = [name for name, required in table.items() if required and name not in got]
    if missing:
        raise Malformed(f"{missing[0]} missing")
    check_message(ftype, got)
    return got


def check_message(ftype, f):
    if ftype == M.PUSH:
        if "id" in f and not f["id"]:
            raise Malformed("empty id")                          # 4.13-1
        if ("target_kind" in f) != ("target" in f):
            raise Malformed("target_kind without target")        # 4.13-1
    if ftype in (M.FETCH_OK, M.ACK_OK) and len(f.get("id", bytes(16))) != 16:
        raise Malformed("store id not 16 bytes")                 # 3.3-6
    if ftype == M.SYNC_OK and len(f.get("ids", b"")) % 16:
        raise Malformed("ids not a multiple of 16")              # 3.3-5
    if ftype == M.HELLO_OK and (f.get("version") != 1 or f.get("max_inflight") == 0
                                or not 1024 <= f.get("max_frame", 0)):
        raise Malformed("HELLO_OK values out of range")


def header_fault(magic, version, flags, reserved, length, max_frame):
    """The first failing header check, in the order of 2-11, as a fatal status, or None."""
    if magic != MAGIC and not fault("lenient-magic"):
        return S.MALFORMED_FRAME, "bad magic"
    if fault("lenient-header"):
        return None
    if version != VERSION and not fault("lenient-version"):
        return S.UNSUPPORTED_VERSION, "bad version"
    if flags or reserved:
        return S.MALFORMED_FRAME, "flags or reserved bits set"
    if HEADER.size + length > max_frame and not fault("read-large"):
        return S.FRAME_TOO_LARGE, f"frame of {HEADER.size + length} bytes over {max_frame}"
    return None

# ---------------------------------------------------------------------------------------
# One connection to a service, with reconnect backoff (5.8-1 to 5.8-3)


class Request:
    """A request the device needs answered: FETCH, SYNC or ACK (or the link's HELLO, PING)."""

    def __init__(self, kind, pid=None, cursor=None, token=None):
        self.kind, self.pid, self.cursor, self.token = kind, pid, cursor, token
        self.tries = 0
        self.not_before = 0.0
        self.tokenless = False          # the sync-before-token fault


BACKOFF_BASE, BACKOFF_CAP = 0.1, 5.0


class Link:
    CONNECT_TIMEOUT, HELLO_TIMEOUT = 5.0, 10.0

    def __init__(self, device, name, address, credential=None):
        self.device, self.name, self.address, self.credential = device, name, address, credential
        self.sock = None
        self.state = "wait"            # wait, connecting, hello, ready, dead
        self.failures = 0              # failed attempts in a row (5.8-3)
        self.failing_since = 0.0       # when the run of failed attempts began (the give-up fault)
        self.attempts_made = 0
        self.faulty_hello = False
        self.next_attempt = time.monotonic()
        self.queue = []                # requests waiting to be sent
        self.reset()

    def reset(self):
        now = time.monotonic()
        # The partial-frame fault keeps what it had not parsed (a frame cut off by the
        # close, or what a fatal fault left) as the start of the next connection's bytes.
        self.inbuf = self.inbuf if fault("partial-frame") and hasattr(self, "inbuf") else bytearray()
        self.out = bytearray()
        self.corr, self.pending = 0, {}
        self.max_frame, self.keepalive, self.max_inflight = CLIENT_MAX_FRAME, 0.0, 1
        self.goaway_last = None        # last_correlation of a GOAWAY SHUTTING_DOWN we got
        self.stalled = False           # the goaway-stays fault: a GOAWAY seen, the close left to the server
        self.peer_last = 0             # highest peer request we processed, for our GOAWAY
        self.opened = self.last_sent = self.last_recv = now

    # -- timers ---------------------------------------------------------------------------

    def deadline(self):
        if self.state == "wait":
            return self.next_attempt
        if self.state in ("connecting", "hello"):
            return self.opened + (self.CONNECT_TIMEOUT if self.state == "connecting" else self.HELLO_TIMEOUT)
        if self.state != "ready":
            return float("inf")
        times = [r.not_before for r in self.queue if r.not_before > time.monotonic()]
        if self.keepalive and not fault("no-silence-timeout"):
            times.append(self.last_recv + 1.5 * self.keepalive)
            if self.goaway_last is None and not self.stalled and not fault("no-keepalive"):
                times.append(self.last_sent + self.keepalive)
        return min(times, default=float("inf"))

    def tick(self, now):
        if (self.state == "wait" and now >= self.next_attempt and self.name == "gateway" and fault("give-up")
                and self.failures and now - self.failing_since >= 2.5):
            self.state = "dead"
            log("gateway: giving up")
        if self.state == "wait" and now >= self.next_attempt:
            self.connect()
        elif self.state in ("connecting", "hello") and now >= self.deadline():
            self.lost(f"no {'connection' if self.state == 'connecting' else 'HELLO_OK'} in time")
        elif self.state == "ready":
            if self.keepalive and now >= self.last_recv + 1.5 * self.keepalive and not fault("no-silence-timeout"):
                return self.fatal(S.TIMEOUT, "peer silent for 1.5 x keepalive")     # 5.4-2
            if (self.keepalive and now >= self.last_sent + self.keepalive and self.goaway_last is None
                    and not self.stalled and not fault("no-keepalive")):
                self.request(M.PING, Request("PING"))                                # 5.4-1
            self.pump()

    # -- connecting -----------------------------------------------------------------------

    def connect(self):
        host, port = self.address
        self.reset()
        self.state = "connecting"
        try:
            family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
            self.sock = socket.socket(family, kind, proto)
            self.sock.setblocking(False)
            err = self.sock.connect_ex(addr)
        except OSError as error:
            return self.lost(f"connect: {error}")
        if err not in (0, errno.EINPROGRESS):
            return self.lost(f"connect: {os.strerror(err)}")
        self.device.selector.register(self.sock, selectors.EVENT_WRITE, self)

    def connected(self):
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            return self.lost(f"connect: {os.strerror(err)}")
        self.state = "hello"
        self.opened = time.monotonic()
        self.attempts_made += 1
        self.request(M.HELLO, Request("HELLO"))                                     # 5.1-1
        if self.name == "gateway" and fault("early-request"):
            self.request(M.PING, Request("PING"))   # seen only where HELLO_OK is held back

    def hello_body(self):
        fields = [("role", 1), ("version_min", 1), ("version_max", 1)]
        first = self.attempts_made == 1
        # no-credential: the first gateway HELLO of a device started logged out, and the
        # refusal it gets is not taken as final, so that the device still gets in.
        self.faulty_hello = (fault("no-credential") and first and self.credential is not None
                             and self.device.logged_out_at_start)
        if self.credential is not None and not self.faulty_hello:
            fields.append(("credential", self.credential))                           # 4.2-2
        elif self.name == "store" and fault("store-credential"):
            fields.append(("credential", self.device.gateway.credential))
        fields += [("max_frame", CLIENT_MAX_FRAME), ("name", b"mini_device")]
        body = encode(fields)
        if self.name == "gateway" and fault("big-hello") and first:
            pad = 1100 - HEADER.size - len(body) - 3
            body += bytes([0x7F]) + varint(pad) + bytes(pad)
        return body

    def hello_answered(self, ftype, status, f):
        if fault("reset-on-connect"):
            self.failures = 0
        if ftype != M.HELLO_OK or f is None:
            self.stop_if_incurable(status)
            return self.lost(f"HELLO refused (type 0x{ftype:02x}, status {status})", answered=True)
        self.max_frame = min(f["max_frame"], 16777216)
        self.keepalive = f["keepalive_ms"] / 1000.0
        self.max_inflight = f["max_inflight"]
        self.state, self.failures = "ready", 0                                      # 5.8-3
        self.last_recv = time.monotonic()
        log(f"{self.name}: HELLO_OK (keepalive {f['keepalive_ms']} ms, max_inflight {self.max_inflight})")
        if self.name == "gateway" and fault("second-hello"):
            self.send(frame(M.HELLO, 99, encode([("role", 2), ("version_min", 1), ("version_max", 1)])))
        self.device.link_ready(self)

    def stop_if_incurable(self, status):
        if status == S.REVOKED and fault("reconnect-after-revoked"):
            return
        if status in S.INCURABLE and not self.faulty_hello:
            self.state = "dead"
            log(f"{self.name}: refused with status 0x{status:x}, which waiting cannot cure: not trying again")

    def lost(self, reason, answered=False):
        """The connection ended (or never opened): requeue, then wait as 5.8-1 says."""
        if self.sock is not None:
            try:
                self.device.selector.unregister(self.sock)
            except (KeyError, ValueError):
                pass
            self.sock.close()
            self.sock = None
        owed = [self.pending[c] for c in sorted(self.pending)]
        owed = [r for r in owed if r.kind not in ("HELLO", "PING")]
        self.queue[:0] = owed                                                        # 5.8-5
        self.pending = {}
        if self.state == "dead":
            return
        unanswered = self.state in ("connecting", "hello") and not answered   # the no-backoff fault
        self.failures += 1
        self.state = "wait"
        # give-up starts from 50 ms (5.8-1's least base), so that its attempts before it
        # gives up are enough for the cases that judge the waits, and draws no jitter, so
        # that the jitter case fails for it every time instead of passing or skipping by chance.
        give_up = fault("give-up") and self.name == "gateway"
        base = 0.05 if give_up else BACKOFF_BASE
        nominal = min(BACKOFF_CAP, base * 2 ** (self.failures - 1))
        wait = nominal * random.uniform(0.5, 1.5)                                   # 5.8-1, 5.8-2
        if fault("no-jitter") or give_up:
            wait = nominal
        if fault("no-backoff") and unanswered:
            wait = 0.02 * random.uniform(0.5, 1.5)
        self.next_attempt = time.monotonic() + wait
        log(f"{self.name}: {reason}; attempt {self.failures + 1} in {wait * 1000:.0f} ms")
        if self.failures == 1:
            self.failing_since = time.monotonic()

    def fatal(self, status, reason):
        """A fatal fault found here: GOAWAY with its status if it can be written, then close (5.6-1)."""
        try:
            last = 0 if fault("goaway-last-zero") else self.peer_last
            goaway = frame(M.GOAWAY, 0, encode([("last_correlation", last)]), status)
            self.sock.send(bytes(self.out) + (b"" if fault("silent-fatal-close") else goaway))
        except OSError:
            pass
        self.lost(f"fatal 0x{status:x}: {reason}")

    # -- writing --------------------------------------------------------------------------

    def send(self, data):
        self.out += data
        self.last_sent = time.monotonic()
        self.flush()

    def flush(self):
        if self.sock is None or self.state == "connecting":
            return
        try:
            while self.out:
                n = self.sock.send(self.out)
                del self.out[:n]
        except BlockingIOError:
            pass
        except OSError as error:
            return self.lost(f"write: {error}")
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out else 0)
        self.device.selector.modify(self.sock, events, self)

    def request(self, ftype, req, body=None, **header):
        self.corr += 1
        if self.corr == 7 and fault("reuse-correlation"):
            self.corr += 1                      # 7 is the FETCHes' own
        corr = wire = self.corr
        if req.kind == "FETCH" and fault("reuse-correlation"):
            wire = 7
        self.pending[corr] = req
        self.send(frame(ftype, wire, self.hello_body() if ftype == M.HELLO else (body or b""), **header))

    def inflight(self):
        return sum(1 for r in self.pending.values() if r.kind != "PING")

    def submit(self, req):
        self.queue.append(req)
        self.pump()

    def pump(self):
        """Sends the due requests, within max_inflight (5.3-1), none after a GOAWAY (4.4-2)."""
        if self.state != "ready" or self.goaway_last is not None or self.stalled:
            return
        now, i = time.monotonic(), 0
        while i < len(self.queue) and self.sock is not None:
            if self.inflight() >= self.max_inflight and not fault("ignore-inflight"):
                return
            if self.queue[i].not_before > now:
                i += 1
                continue
            req = self.queue.pop(i)
            built = self.device.build(req)
            if built is not None:
                ftype, body, header = built
                self.request(ftype, req, body, **header)

    # -- reading --------------------------------------------------------------------------

    def on_event(self, mask):
        if self.state == "connecting":
            return self.connected() if mask & selectors.EVENT_WRITE else None
        if mask & selectors.EVENT_WRITE:
            self.flush()
        if mask & selectors.EVENT_READ and self.sock is not None:
            self.readable()

    def wanted(self):
        """Bytes to read next: the rest of the header, then the rest of its frame (2-7)."""
        if len(self.inbuf) < HEADER.size:
            return HEADER.size - len(self.inbuf)
        length = HEADER.unpack_from(self.inbuf)[7]
        return max(1, min(65536, HEADER.size + length - len(self.inbuf)))

    def readable(self):
        for _ in range(64):
            try:
                data = self.sock.recv(self.wanted())
            except BlockingIOError:
                return
            except OSError as error:
                return self.lost(f"read: {error}")
            if not data:
                return self.closed_by_peer()
            self.inbuf += data
            self.last_recv = time.monotonic()
            self.parse()
            if self.sock is None:
                return

    def closed_by_peer(self):
        if self.inbuf and not fault("partial-frame"):
            log(f"{self.name}: discarding {len(self.inbuf)} bytes of a partial frame (2-12)")
        if self.sock is not None:
            self.lost("closed by the server")

    def parse(self):
        while self.sock is not None and len(self.inbuf) >= HEADER.size:
            magic, version, ftype, flags, corr, status, reserved, length = HEADER.unpack_from(self.inbuf)
            bad = header_fault(magic, version, flags, reserved, length, self.max_frame)
            if bad:
                return self.fatal(*bad)
            if len(self.inbuf) < HEADER.size + length:
                return
            body = bytes(self.inbuf[HEADER.size:HEADER.size + length])
            del self.inbuf[:HEADER.size + length]
            self.dispatch(ftype, corr, status, body)

    def dispatch(self, ftype, corr, status, body):
        if ftype not in M.KNOWN:                                                    # 2-4
            if self.state == "ready" and not fault("ignore-unknown-type"):
                self.send(frame(M.ERROR, corr, status=S.UNKNOWN_TYPE))
            return
        if ftype == M.GOAWAY:
            return self.on_goaway(status, body)
        if ftype == M.MISSED:
            return self.on_missed(status, body)
        if ftype in M.REQUESTS:
            return self.on_request(ftype, corr, status, body)
        self.on_reply(ftype, corr, status, body)

    def decoded(self, ftype, status, body):
        """The fields, or None for a body, status or type that fails (5.6-3 for replies)."""
        if status != S.OK and ftype not in (M.ERROR, M.GOAWAY):
            return None                                                              # 2-10
        try:
            return decode(ftype, body) if ftype in TABLES else None
        except Malformed as error:
            log(f"{self.name}: malformed 0x{ftype:02x}: {error}")
            return None

    def on_request(self, ftype, corr, status, body):
        if self.state != "ready":
            return                              # nothing but HELLO before HELLO_OK (5.1-1)
        self.peer_last = max(self.peer_last, corr)
        served = ftype == M.PING or (ftype == M.PUSH and self.name == "gateway")
        f = self.decoded(ftype, status, body) if served else None
        if f is None:
            if fault("lenient-requests"):
                return
            return self.send(frame(M.ERROR, corr, status=S.BAD_REQUEST))              # 4.1-4, 5.6-2
        if ftype == M.PING:
            if not fault("no-pong"):
                self.send(frame(M.PONG, corr, flags=int(fault("flags"))))             # 4.3-1
            return
        self.device.on_push(self, corr, f)

    def take_pending(self, ftype, corr, body):
        fetches = sorted(c for c, r in self.pending.items() if r.kind == "FETCH")
        if fault("reuse-correlation") and corr == 7 and fetches:
            # every FETCH went out as 7: the fault's own bookkeeping finds the one by its id
            replied = dict(split_fields(body, lenient=True)).get(TAG["id"])
            corr = next((c for c in fetches if self.pending[c].pid == replied), fetches[0])
        elif fault("match-in-order") and ftype == M.FETCH_OK and fetches:
            corr = fetches[0]                   # the oldest FETCH, whatever the correlation
        return self.pending.pop(corr, None)

    def on_reply(self, ftype, corr, status, body):
        req = self.take_pending(ftype, corr, body)
        if req is None:                                                              # 5.3-5
            log(f"{self.name}: reply 0x{ftype:02x} with correlation {corr} nobody waits for: discarded")
            if fault("close-on-stray"):
                self.lost("stray reply")
            return
        f = None
        if ftype == M.ERROR and status == S.OK and fault("close-on-error-ok"):
            self.queue.insert(0, req)           # asked again on the next connection
            return self.fatal(S.MALFORMED_FRAME, "ERROR with status OK")
        if ftype == M.ERROR and fault("status-from-text"):
            status = status_named(self.decoded(M.ERROR, S.OK, body)) or status
        if ftype == M.ERROR:
            status = status or S.INTERNAL                                            # 6-4
        elif ftype == REPLY_OF[req.kind]:
            f, status = self.decoded(ftype, status, body), S.OK
        else:
            status = None                       # the wrong reply type: a malformed reply
        if req.kind == "HELLO":
            return self.hello_answered(ftype, status, f)
        if req.kind != "PING":
            if ftype != M.ERROR and f is None:
                status = None
            self.device.answered(self, req, status, f)
        self.maybe_finish_drain()

    def on_goaway(self, status, body):
        f = self.decoded(M.GOAWAY, S.OK, body)
        self.stop_if_incurable(status)
        if self.state != "ready":
            return self.lost(f"GOAWAY 0x{status:x} before HELLO_OK")
        if status == S.OK and fault("goaway-ok-ignored"):
            return log(f"{self.name}: GOAWAY with status OK: ignored")
        if status in S.KNOWN and status not in (S.OK, S.SHUTTING_DOWN) and fault("goaway-stays"):
            self.stalled = True                 # no request from now on, but the server is left to close
            return log(f"{self.name}: GOAWAY 0x{status:x}: waiting for the server to close")
        if status != S.SHUTTING_DOWN or f is None:
            if status not in S.KNOWN and self.name == "gateway" and fault("stop-on-unknown-goaway"):
                self.state = "dead"
            return self.lost(f"GOAWAY 0x{status:x}")                                  # 5.6-4, 6-1
        if fault("no-drain"):
            return self.close_without_drain(f["last_correlation"])
        if fault("request-after-goaway"):
            return log(f"{self.name}: GOAWAY SHUTTING_DOWN ignored")
        self.goaway_last = f["last_correlation"]                                     # 5.5-2
        unprocessed = [self.pending.pop(c) for c in sorted(self.pending) if c > self.goaway_last]
        unprocessed = [r for r in unprocessed if r.kind != "PING"]
        if fault("no-retry-after-goaway"):
            for req in unprocessed:
                self.device.forget(req)
        else:
            self.queue[:0] = unprocessed                                             # 5.8-5
        log(f"{self.name}: GOAWAY SHUTTING_DOWN, last_correlation {self.goaway_last}")
        self.maybe_finish_drain()

    def close_without_drain(self, last):
        """The no-drain fault: the requests up to `last` are neither awaited nor sent again
        (their ids stay in progress for good); those above it are sent again."""
        above = [self.pending[c] for c in sorted(self.pending) if c > last]
        self.pending = {}
        self.queue[:0] = [r for r in above if r.kind not in ("HELLO", "PING")]
        self.lost("GOAWAY SHUTTING_DOWN: closed at once")

    def maybe_finish_drain(self):
        if self.goaway_last is not None and self.sock is not None:
            if not any(r.kind != "PING" for r in self.pending.values()):
                self.lost("server shut the connection down; every owed reply came")

    def on_missed(self, status, body):
        if self.state != "ready" or self.name != "gateway":
            return
        if self.decoded(M.MISSED, status, body) is None:                             # 5.6-3
            if fault("error-on-missed"):
                self.send(frame(M.ERROR, 0, status=S.BAD_REQUEST))
            return
        if not fault("ignore-missed"):
            self.device.sync("MISSED")                                               # 4.15-2

# ---------------------------------------------------------------------------------------
# The device: what it shows, what it fetches, what it remembers


class Device:
    TOKEN_CHECK = 0.3
    MAX_PAGES = 100

    def __init__(self, args, credential):
        self.selector = selectors.DefaultSelector()
        self.state_dir = args.state
        self.token_path = os.path.join(args.state, "fetch-token")
        self.ids_path = os.path.join(args.state, "shown-ids")
        self.shown, self.generic, self.final, self.waiting = set(), set(), set(), set()
        self.read_at_start = ""
        self.loaded = set()             # ids shown by an earlier run (the show-twice fault)
        self.reshow = set()             # the show-twice fault: ids a repeated PUSH fetches again
        self.later = []                 # the ack-before-show fault: (when, id, content) to show
        self.unsaved = []
        self.load_shown()
        self.fetching, self.acking, self.forgotten = set(), set(), set()
        self.token, self.token_bad, self.token_sig, self.next_token_check = None, False, "start", 0.0
        self.first_sync = True          # the sync-before-token fault
        self.listing, self.sync_again, self.pages, self.gateway_seen = None, False, 0, False
        self.store_seen = False
        self.made_cursor = False
        self.gateway = Link(self, "gateway", args.gateway, credential)
        self.store = Link(self, "store", args.store)
        self.check_token()
        self.logged_out_at_start = self.token is None

    # -- persistence (4.14-11) -----------------------------------------------------------

    def load_shown(self):
        try:
            with open(self.ids_path, encoding="ascii", errors="replace") as fh:
                self.read_at_start = fh.read()
        except FileNotFoundError:
            return
        lines = self.read_at_start.splitlines()
        for line in lines:
            kind, _, hexid = line.partition(" ")
            try:
                pid = bytes.fromhex(hexid)
            except ValueError:
                continue                                        # a line cut off by a crash
            if kind == "content":
                self.shown.add(pid)
            elif kind in ("generic", "sealed"):
                self.generic.add(pid)
                (self.final if kind == "sealed" else self.waiting).add(pid)
        self.waiting -= self.shown | self.final
        self.loaded = set(self.shown)

    def record(self, kind, pid):
        """Appends and syncs one line before the showing it records is made visible."""
        if fault("save-on-exit"):
            return self.unsaved.append(f"{kind} {pid.hex()}\n")
        self.append(f"{kind} {pid.hex()}\n")

    def append(self, text):
        fd = os.open(self.ids_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if fault("world-readable-state"):
            os.fchmod(fd, 0o644)
        try:
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def save(self):
        """At a stop by signal: what the save-on-exit fault kept back (a SIGKILL loses it),
        or, with the stale-save fault, the file as it was read at start."""
        if fault("stale-save"):
            with open(self.ids_path, "w", encoding="ascii") as fh:
                fh.write(self.read_at_start)
        if self.unsaved:
            self.append("".join(self.unsaved))
            self.unsaved = []

    # -- showing --------------------------------------------------------------------------

    def already_shown(self, pid):
        return pid in self.shown

    def show_content(self, pid, content):
        if self.already_shown(pid) and pid not in self.reshow:
            return
        self.reshow.discard(pid)
        self.record("content", pid)
        self.shown.add(pid)
        self.waiting.discard(pid)
        emit(f"SHOWN {pid.hex()} PAYLOAD" + (f" {content.hex()}" if content else ""))
        if fault("stdout-noise"):
            emit(f"shown {len(content)} bytes")

    def show_generic(self, pid, final=False):
        """The generic notification, once per id; `final`: never fetched again (4.14-10)."""
        if final and pid not in self.final:
            self.record("sealed", pid)
            self.final.add(pid)
            self.waiting.discard(pid)
        elif not final and not fault("forget-generic"):
            self.waiting.add(pid)                                                    # 4.14-4
        if pid in self.generic and not fault("generic-every-time"):
            return
        if not final:
            self.record("generic", pid)
        self.generic.add(pid)
        emit(f"SHOWN {pid.hex()} GENERIC")

    # -- token (7.5-4, B.2) -----------------------------------------------------------------

    def usable_token(self):
        return None if self.token_bad else self.token

    def check_token(self):
        try:
            st = os.stat(self.token_path)
            sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            sig = None
        if sig == self.token_sig:
            return
        self.token_sig = sig
        token = read_token(self.token_path) if sig else None
        if token == self.token:
            return
        self.token, self.token_bad = token, False
        log("fetch token " + ("read" if token else "gone"))
        if token is not None:                   # the next successful login: fetch kept ids (4.14-13)
            for pid in sorted(self.waiting):
                self.want(pid)

    # -- events from the links ----------------------------------------------------------------

    def link_ready(self, link):
        if link is self.store:
            if fault("no-sync-on-reconnect") and self.store_seen:
                return
            self.store_seen = True
            self.sync("store connected")                                            # 4.15-2
        elif self.gateway_seen:
            self.sync("gateway reconnected")    # a restarted gateway forgot its queue (4.13-8)
        self.gateway_seen = self.gateway_seen or link is self.gateway

    def on_push(self, link, corr, f):
        pid = f["id"]                           # required: decode() refused a PUSH without it
        ignored = ("target_kind", "target", "ttl_s", "user", "once")                 # 4.14-1
        if fault("strict-push") and any(k in f for k in ignored):
            return link.send(frame(M.ERROR, corr, status=S.BAD_REQUEST))
        if not fault("delivery-ack-needs-token") or self.usable_token() is not None:  # 4.14-2
            acked = pid.hex().encode() if fault("delivery-ack-hex-id") else pid
            link.send(frame(M.DELIVERY_ACK, corr, encode([("id", acked)])))
        if (fault("show-twice") and pid in self.shown - self.loaded and pid not in self.fetching
                and self.usable_token()):
            self.reshow.add(pid)                # what it showed this run is not checked: shown again
            self.fetching.add(pid)
            return self.store.submit(Request("FETCH", pid))
        self.want(pid)

    def want(self, pid):
        """An id a PUSH or a SYNC named: fetch it, or show the generic notification."""
        if pid in self.forgotten or pid in self.final:
            return
        if self.already_shown(pid) or pid in self.fetching:
            return
        if len(pid) != 16:
            return log(f"id {pid.hex()} is not a store id: not fetched")
        if self.usable_token() is None:
            return self.show_generic(pid)                                           # 4.14-4
        self.fetching.add(pid)
        self.store.submit(Request("FETCH", pid))

    def ack(self, pid, token):
        if token is None or pid in self.acking:
            return
        self.acking.add(pid)
        self.store.submit(Request("ACK", pid, token=token))

    def sync(self, reason):
        if self.listing is not None:            # one listing at a time; another after it
            first_unsent = self.listing.cursor == ZERO_CURSOR and self.listing in self.store.queue
            self.sync_again = self.sync_again or not first_unsent
            return
        log(f"SYNC ({reason})")
        self.pages = 0
        self.listing = Request("SYNC", cursor=ZERO_CURSOR)
        self.listing.tokenless = fault("sync-before-token") and self.first_sync
        self.first_sync = False
        self.store.submit(self.listing)

    def forget(self, req):
        """The no-retry-after-goaway fault: a request given up, and its id with it."""
        self.fetching.discard(req.pid)
        if req.kind == "FETCH":
            self.forgotten.add(req.pid)
        if req is self.listing:
            self.listing = None

    def build(self, req):
        """The frame of a request about to be sent, with the token as it is now, or None."""
        if req.kind == "FETCH":
            req.token = self.usable_token()
            if req.token is None:               # logged out, or the token was refused meanwhile
                self.fetching.discard(req.pid)
                self.show_generic(req.pid)
                return None
            fields = [("token", req.token), ("id", req.pid)]
            padded = ("id",) if fault("padded-length") else ()
            return M.FETCH, encode(fields, descending=fault("field-order"), padded=padded), {}
        if req.kind == "SYNC":
            req.token = None if req.tokenless else self.usable_token()
            fields = ([("token", req.token)] if req.token else []) + [("cursor", req.cursor)]
            return M.SYNC, encode(fields), {}
        token = req.token.hex().encode() if fault("ack-hex-token") else req.token
        return M.ACK, encode([("token", token), ("id", req.pid)]), {}

    def answered(self, link, req, status, f):
        """status: OK with fields f, an ERROR's status, or None for a malformed reply."""
        if status not in (S.OK, None) and status not in S.KNOWN:                     # 6-1
            log(f"{req.kind}: unknown status 0x{status:x}: retried")
            if fault("close-on-unknown-status"):
                link.queue.insert(0, req)
                return link.lost("ERROR of unknown status")
        {"FETCH": self.fetched, "SYNC": self.synced, "ACK": self.acked}[req.kind](req, status, f)

    def retry(self, req, status):
        """A request not carried out: again after a wait, 100 ms or more (5.8-4)."""
        req.tries += 1
        nominal = min(BACKOFF_CAP, 0.2 * 2 ** (req.tries - 1))
        wait = nominal * random.uniform(0.5, 1.5)
        if status == S.RATE_LIMITED and fault("busy-immediate"):
            wait = 0.0
        req.not_before = time.monotonic() + wait
        self.store.submit(req)

    def fetched(self, req, status, f):
        pid = req.pid
        retryable = status in S.RETRY or (status is not None and status not in S.KNOWN)
        if status == S.BUSY and fault("busy-generic"):
            retryable = False
        if status == S.TOKEN_EXPIRED and fault("expired-retry"):
            retryable = True
        if retryable:
            return self.retry(req, status)
        self.fetching.discard(pid)
        if status == S.OK:
            return self.fetch_ok(pid, f, req.token)
        if status in S.TOKEN or status == S.BUSY:   # BUSY gets here only with busy-generic
            if status in S.TOKEN and req.token == self.token:
                self.token_bad = True           # no FETCH with it until the file changes
            elif status in S.TOKEN and self.usable_token() is not None:
                return self.want(pid)           # a newer token came meanwhile
            self.show_generic(pid)
            if status == S.BAD_TOKEN and fault("bad-token-ack"):
                self.ack(pid, req.token)
        elif status == S.NOT_SEALED_FOR_DEVICE:
            self.show_generic(pid, final=True)                                       # 4.14-10
            if fault("ack-unsealed"):
                self.ack(pid, req.token)
        else:                                   # NOT_FOUND, GONE, FORBIDDEN, malformed reply, ...
            if status == S.GONE and fault("ack-gone"):
                self.ack(pid, req.token)
            self.waiting.discard(pid)
            log(f"FETCH {pid.hex()}: " + ("malformed reply" if status is None else f"status 0x{status:x}"))

    def fetch_ok(self, pid, f, token):
        if f["id"] != pid and not fault("match-in-order"):
            return log(f"FETCH_OK for another id than {pid.hex()}: rejected")
        plain, sealed = "payload" in f, "sealed_payload" in f
        if plain and (not sealed or fault("first-field")) and fault("ack-before-show"):
            self.ack(pid, token)
            self.later.append((time.monotonic() + 0.3, pid, f["payload"]))
        elif plain and (not sealed or fault("first-field")):
            self.show_content(pid, f["payload"])
            self.ack(pid, token)                                                    # 4.14-12
        elif sealed and not plain and fault("show-sealed"):
            self.show_content(pid, f["sealed_payload"])
        elif sealed and not plain:
            self.show_generic(pid, final=True)  # no device key here to open it (4.14-10)
        else:
            log(f"FETCH_OK for {pid.hex()} with both or neither payload field: rejected (4.8-4)")

    def synced(self, req, status, f):
        if status in S.RETRY or (status is not None and status not in S.KNOWN):
            return self.retry(req, status)
        if status == S.OK:
            ids = f["ids"]
            for i in range(0, len(ids), 16):
                pid = ids[i:i + 16]
                if self.already_shown(pid):
                    self.ack(pid, self.usable_token())    # shown before, its ACK lost: again
                else:
                    self.want(pid)
            self.pages += 1
            if f["has_more"] == 1 and self.pages < self.MAX_PAGES:                 # 4.9-2
                cursor = f["cursor"]
                if fault("cursor-made") and not self.made_cursor:
                    self.made_cursor = True     # the store's cursor plus one: a cursor it never gave
                    cursor = (int.from_bytes(cursor, "big") + 1).to_bytes(8, "big")
                self.listing = Request("SYNC", cursor=cursor)
                return self.store.submit(self.listing)
        self.listing = None                     # a refused token: only a FETCH's refusal marks it bad
        if self.sync_again:
            self.sync_again = False
            self.sync("requested during the last listing")

    def acked(self, req, status, f):
        if status in S.RETRY or (status is not None and status not in S.KNOWN):
            return self.retry(req, status)
        self.acking.discard(req.pid)
        if status == S.OK and fault("unsolicited-error"):
            self.store.corr += 1                # a number of its own, which no frame of the store carries
            self.store.send(frame(M.ERROR, self.store.corr, status=S.INTERNAL))

    # -- the loop ---------------------------------------------------------------------------

    def deadline(self):
        return min([self.gateway.deadline(), self.store.deadline(), self.next_token_check]
                   + [when for when, _, _ in self.later])

    def tick(self):
        now = time.monotonic()
        for due in [item for item in self.later if item[0] <= now]:
            self.later.remove(due)
            self.show_content(due[1], due[2])
        if now >= self.next_token_check:
            self.next_token_check = now + self.TOKEN_CHECK
            self.check_token()
        self.gateway.tick(now)
        self.store.tick(now)


def emit(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def read_token(path):
    """The token of a fetch-token file (7.5-4), or None when it does not read that way."""
    try:
        with open(path, encoding="ascii") as fh:
            parts = fh.read().split()
        if parts and fault("lenient-token") and not all(c in "0123456789abcdefABCDEF" for c in parts[0]):
            return parts[0].encode()            # whatever the file says is the token
        token = bytes.fromhex(parts[0])
        int(parts[1])
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    return token if len(parts) == 2 and token else None


def host_port(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def parse_args(argv):
    p = argparse.ArgumentParser(description="securepush mini device (a conformance test fixture)")
    p.add_argument("--gateway", type=host_port)
    p.add_argument("--store", type=host_port)
    p.add_argument("--credential")
    p.add_argument("--state")
    p.add_argument("--device")
    p.add_argument("--user")
    p.add_argument("--fault", action="append", default=[], choices=sorted(FAULTS), metavar="NAME")
    p.add_argument("--list-faults", action="store_true")
    args = p.parse_args(argv)
    if not args.list_faults:
        missing = [n for n in ("gateway", "store", "credential", "state", "device", "user")
                   if getattr(args, n) is None]
        if missing:
            p.error("missing --" + ", --".join(missing))
    return args


def read_credential(path):
    """A registration credential file (7.5-3): hex, either case, whitespace ignored."""
    with open(path, encoding="ascii") as fh:
        text = fh.read()
    if fault("strict-credential-hex") and (text != text.lower() or len(text.split()) != 1):
        raise ValueError("not lowercase hex on one line")
    credential = bytes.fromhex("".join(text.split()))
    if not 0 < len(credential) <= 1024:
        raise ValueError("credential empty or over 1024 bytes")
    return credential


def main(argv):
    args = parse_args(argv)
    if args.list_faults:
        for name, text in FAULTS.items():
            print(f"{name}\t{text}")
        return 0
    ACTIVE.update(args.fault)
    try:
        credential = read_credential(args.credential)
        os.makedirs(args.state, exist_ok=True)
    except (OSError, ValueError, UnicodeDecodeError) as error:
        sys.stderr.write(f"mini_device: {error}\n")
        return 2
    device = Device(args, credential)
    log(f"device {args.device} of {args.user}; faults: {', '.join(sorted(ACTIVE)) or 'none'}")

    wake_r, wake_w = os.pipe()                  # a signal wakes the select below
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    device.selector.register(wake_r, selectors.EVENT_READ, None)
    while not STOP:
        device.tick()
        timeout = max(0.0, min(1.0, device.deadline() - time.monotonic()))
        for key, mask in device.selector.select(timeout):
            if key.data is None:
                os.read(wake_r, 512)
            elif key.fileobj is key.data.sock:
                key.data.on_event(mask)
    device.save()
    log("stopped by signal")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
