#!/usr/bin/env python3
"""mini_provider: a small securepush provider client, a fixture of the client conformance tests.

A TEST FIXTURE, not a product. It speaks the provider side of protocol/SPEC.md (frames, HELLO
with a provider credential, SEND, STORE, RECALL to the store, PUSH to the gateway, PING,
GOAWAY, keepalive, retries and reconnect backoff) and meets Appendix B.3 of the client
contract: one command per stdin line, one answer line per command on stdout, each flushed.
With `--fault NAME` it misbehaves in one small way, so that the provider case named for the
fault fails (`--list-faults` prints them; provider-faults.txt lists the cases each fails).

    python3 mini_provider.py --store HOST:PORT --gateway HOST:PORT --provider-key FILE [--fault NAME]

Diagnostics go to stderr. Python 3.11, standard library only.

What it does (protocol/SPEC.md, provider side):
- Commands `SEND`, `STORE`, `PUSH`, `RECALL` (B.3), pipelined: each is queued for its server
  at once and answered when its reply comes, so answers may come out of order; a line that
  does not parse is answered `<tag> ERROR INVALID` (`? ERROR INVALID` without a tag).
- One connection to the store and one to the gateway, opened when a command first needs
  it; HELLO with role 2 and a new provider credential every time (7.1, audience 1 for the
  store and 2 for the gateway), nothing else before HELLO_OK (5.1-1); correlation ids
  1 (HELLO), 2, 3, ... per connection (5.3-3); at most max_inflight requests outstanding
  (5.3-1), each reply matched by correlation id alone (5.3-2), stray replies dropped (5.3-5).
- PONG to PING (4.3-1), ERROR UNKNOWN_TYPE to a frame of unknown type (2-4), ERROR
  BAD_REQUEST to any other request from a server (4.1-4); a header with a bad magic,
  version, flag or reserved bit, or too long, ends the connection with GOAWAY (2-2 to 2-7).
- Keepalive (5.4): PING after keepalive_ms without sending, GOAWAY TIMEOUT and close after
  1.5 x keepalive_ms without receiving.
- ERROR BUSY, RATE_LIMITED or INTERNAL: sent again after at least 100 ms, the k-th retry after
  the backoff below, at most 5 sends in all, then the status is reported (5.8-4). An unknown
  status fails its command only, reported as `STATUS_0x...` (6-1).
- GOAWAY (4.4, 5.5): no further request on that connection; requests above last_correlation
  go on the next connection (5.8-5). SHUTTING_DOWN: replies up to last_correlation still
  awaited; any other status closes at once. A request left without a reply when a connection
  ends is sent again only if it is safe to repeat (RECALL, SEND with key=); a STORE, a PUSH
  or a SEND without a key is answered `ERROR DISCONNECTED` (its outcome is unknown).
- Reconnects (5.8-1 to 5.8-3): after the k-th failure in a row it waits
  min(5 s, 100 ms x 2^(k-1)) drawn between 0.5 and 1.5 times; only HELLO_OK ends a run; after
  8 failures in a row the commands waiting for that server are answered `ERROR DISCONNECTED`.
- At the end of stdin it finishes the commands it has, writes their answers and exits 0.

The loop wakes at least every 50 ms, so its waits may run up to 50 ms longer than drawn.
"""

import argparse
import collections
import hashlib
import hmac
import os
import random
import re
import selectors
import signal
import socket
import struct
import sys
import time

# ---------------------------------------------------------------------------------------
# Faults: each is one small misbehaviour, marked `fault("NAME")` where it happens.

FAULTS = {
    "wrong-audience-first": "prov.hello.credential: the first HELLO to the gateway carries a credential made for the store",
    "reuse-credential": "prov.hello.fresh: makes one credential per server and sends it in every HELLO",
    "request-before-hello-ok": "prov.hello.first: on its first store connection, sends a request right after HELLO",
    "flags": "prov.frame.header: flags bit 0x01 on the first HELLO to the gateway",
    "reserved": "prov.frame.header: reserved u16 = 1 on the first HELLO to the gateway",
    "field-order": "prov.field.order: writes SEND fields in descending tag order",
    "padded-varint": "prov.field.varint: writes every SEND field length one byte longer than needed",
    "match-in-order": "prov.correlation.match: pairs a reply with the oldest outstanding request",
    "reuse-correlation": "prov.correlation.unique: with 2 requests outstanding, reuses the newest one's correlation id",
    "ignore-inflight": "prov.inflight: sends every queued request regardless of max_inflight, and reports "
                       "the BUSY such a request earns (5.3-4) without a retry",
    "no-pong": "prov.ping.pong: never answers PING",
    "recall-not-found-ok": "prov.error.status: reports a RECALL refused NOT_FOUND as OK",
    "push-target-device": "prov.push.target: PUSH with target_kind 1 (device) instead of 2 (user)",
    "no-busy-retry": "prov.busy.retry: reports BUSY at once, without a retry",
    "busy-no-backoff": "prov.busy.give-up: retries BUSY after 120 ms every time: the waits never grow",
    "no-resend-above-last": "prov.goaway.retry: requests above GOAWAY's last_correlation are reported DISCONNECTED",
    "resend-lost-store": "prov.lost.store-once: a STORE lost with its connection is sent again",
    "ping-after-goaway": "prov.goaway.stop: sends a PING 150 ms after GOAWAY SHUTTING_DOWN on that connection",
    "no-backoff": "prov.reconnect.backoff: reconnects 20 ms (one loop tick) after every failure",
    "ignore-unknown-type": "prov.unknown-type: no ERROR UNKNOWN_TYPE for a frame of unknown type",
    "close-on-stray": "prov.reply.unknown-correlation: closes the connection on a reply nobody waits for",
    "close-on-unknown-status": "prov.error.unknown-status: closes the connection on an ERROR of unknown status",
    "lenient-magic": "prov.frame.bad-magic: does not check the magic byte",
    "no-keepalive": "prov.keepalive.ping: never sends a keepalive PING",
    "silent-fatal-close": "prov.frame.goaway-status: closes on a fatal frame without GOAWAY",
    "strict-fields": "prov.field.unknown: takes a field of an unknown tag in a reply as malformed",
    "no-silence-timeout": "prov.keepalive.silent: never closes a connection that has gone silent",
    "goaway-stays": "prov.goaway.close: after a GOAWAY of a known status but SHUTTING_DOWN, waits for the server to close",
    "goaway-ok-ignored": "prov.goaway.ok-status: ignores a GOAWAY whose status is OK",
    "ok-error-succeeds": "prov.error.ok-status: takes an ERROR whose status is OK as the request's success",
    "no-drain": "prov.goaway.drain: closes at once on GOAWAY SHUTTING_DOWN, giving up on the replies it promised",
    "no-jitter": "prov.reconnect.jitter: waits exactly base * 2^(k-1) between attempts",
    "reset-on-refusal": "prov.reconnect.hello-refused: a HELLO answered ERROR ends the run of failures, as if the server were up",
    "goaway-last-zero": "prov.goaway.last-correlation: its own GOAWAY always carries last_correlation 0",
    "exit-at-eof": "prov.eof.answers: exits at the end of stdin without waiting for the replies it needs",
    "big-hello": "prov.hello.size: pads the name in its first HELLO to the store to 1100 bytes",
    "role-device-first": "prov.hello.role: its first HELLO to the gateway names role 1 (device)",
    "send-to-device": "prov.send.target: a SEND names target_kind 1 (device) with the user as the target",
    "error-on-bad-reply": "prov.reply.malformed: answers a malformed reply with ERROR BAD_REQUEST",
    "strict-key-hex": "prov.key.file-form: reads the key file only as lowercase hex with at most a final newline",
    "any-key-mode": "prov.key.file-mode: reads a key file whatever its mode",
    "lenient-requests": "prov.vector.*: a request the provider does not serve, or a PING with a status, gets no ERROR",
    "lenient-header": "prov.vector.*: version, flags, reserved and length are not checked (the magic still is)",
}
ACTIVE = set()


def fault(name):
    assert name in FAULTS, name
    return name in ACTIVE


def log(text):
    sys.stderr.write(f"mini_provider {time.strftime('%H:%M:%S')} {text}\n")
    sys.stderr.flush()

# ---------------------------------------------------------------------------------------
# Wire codec (SPEC.md 2 and 3)


class M:  # message types (4.1)
    HELLO, HELLO_OK, PING, PONG, GOAWAY, ERROR = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
    STORE, STORE_OK, RECALL, RECALL_OK = 0x12, 0x13, 0x1A, 0x1B
    PUSH, PUSH_ACK, MISSED, SEND, SEND_OK = 0x20, 0x21, 0x23, 0x26, 0x27
    KNOWN = set(range(0x01, 0x07)) | set(range(0x10, 0x28))
    REQUESTS = {0x01, 0x03, 0x10, 0x12, 0x14, 0x16, 0x18, 0x1A, 0x1C, 0x1E, 0x20, 0x24, 0x26}


STATUS = {  # section 6
    0x00: "OK", 0x01: "MALFORMED_FRAME", 0x02: "UNSUPPORTED_VERSION", 0x03: "FRAME_TOO_LARGE",
    0x04: "HELLO_REQUIRED", 0x05: "UNKNOWN_TYPE", 0x06: "BAD_REQUEST", 0x07: "TIMEOUT",
    0x10: "AUTH_REQUIRED", 0x11: "TOKEN_EXPIRED", 0x12: "BAD_TOKEN", 0x13: "BAD_CREDENTIALS",
    0x14: "FORBIDDEN", 0x15: "NOT_FOUND", 0x16: "GONE", 0x17: "UNKNOWN_USER", 0x18: "TOO_LARGE",
    0x19: "RATE_LIMITED", 0x1A: "BUSY", 0x1B: "SHUTTING_DOWN", 0x1C: "REPLACED",
    0x1D: "SLOW_CONSUMER", 0x1E: "REVOKED", 0x1F: "CONFLICT", 0x20: "NOT_SEALED_FOR_DEVICE",
    0x21: "NO_DEVICE_KEYS", 0xFF: "INTERNAL",
}
S = {name: code for code, name in STATUS.items()}
RETRYABLE = {S["BUSY"], S["RATE_LIMITED"], S["INTERNAL"]}   # not carried out (5.8-4)


def status_name(code):
    return STATUS.get(code, f"STATUS_0x{code:x}")   # an unknown code is still a failure (6-1)


HEADER = struct.Struct(">BBBBIHHI")   # magic, version, type, flags, correlation, status, reserved, length
CLIENT_MAX_FRAME = 65536              # what a client accepts before HELLO_OK, and our proposal (2-8)

# Tags the provider writes or reads (3.2).
T = dict(role=0x01, version_min=0x02, version_max=0x03, credential=0x04, max_frame=0x05,
         keepalive_ms=0x06, max_inflight=0x07, version=0x08, name=0x09, message=0x0A,
         last_correlation=0x0B, user=0x10, expires_at=0x14, id=0x15, payload=0x16, ttl_s=0x17,
         cursor=0x19, target_kind=0x30, target=0x31, written=0x35, queued=0x36,
         idempotency_key=0x3C, replayed=0x3E)

# Field tables of the frames a provider receives: tag -> (width in bytes or None, required).
# Width 16 is a store id (3.3-6); None is bytes or string.
TABLES = {
    M.HELLO_OK: {0x05: (4, True), 0x06: (4, True), 0x07: (4, True), 0x08: (1, True), 0x09: (None, False)},
    M.GOAWAY: {0x0A: (None, False), 0x0B: (4, True)},
    M.ERROR: {0x0A: (None, False)},
    M.PING: {}, M.PONG: {},
    M.STORE_OK: {0x14: (8, True), 0x15: (16, True), 0x19: (8, False)},
    M.SEND_OK: {0x14: (8, True), 0x15: (16, True), 0x19: (8, False), 0x3E: (1, False)},
    M.RECALL_OK: {0x15: (16, True)},
    M.PUSH_ACK: {0x35: (4, True), 0x36: (4, True)},
}


class Malformed(Exception):
    """A body that fails a check of section 3: the request it answers fails BAD_REQUEST."""


def varint(n, padded=False):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n or padded else 0))
        if not n:
            break
    if padded:                       # fault padded-varint: one continuation byte too many (3.1-4)
        out.append(0x00)
    return bytes(out)


def encode(fields, descending=False, padded=False):
    """A body from (tag, raw bytes) pairs, in ascending tag order (3.4-1)."""
    ordered = sorted(fields, reverse=descending)
    return b"".join(bytes([tag]) + varint(len(raw), padded) + raw for tag, raw in ordered)


def u(width, value):
    return value.to_bytes(width, "big")


def decode(message_type, body):
    """The fields of a received body as {tag: raw}, checked against its table (3.1 to 3.4)."""
    table, fields, i = TABLES.get(message_type, {}), {}, 0
    while i < len(body):
        tag, i = body[i], i + 1
        length = 0
        for k in range(4):                                    # 1 to 4 varint bytes (3.1-3)
            if i >= len(body):
                raise Malformed("body ends inside a varint")
            byte, i = body[i], i + 1
            length |= (byte & 0x7F) << (7 * k)
            if not byte & 0x80:
                break
        else:
            raise Malformed("varint longer than 4 bytes")
        if i + length > len(body):
            raise Malformed("field runs past the body")
        raw, i = body[i:i + length], i + length
        if tag not in table:                                  # unknown or not in the table: skipped
            if fault("strict-fields"):
                raise Malformed(f"field 0x{tag:02x} is not in the table")
            continue
        if tag in fields:
            raise Malformed(f"field 0x{tag:02x} twice")
        width = table[tag][0]
        if width is not None and len(raw) != width:
            raise Malformed(f"field 0x{tag:02x} is {len(raw)} bytes, not {width}")
        fields[tag] = raw
    for tag, (_, required) in table.items():
        if required and tag not in fields:
            raise Malformed(f"required field 0x{tag:02x} missing")
    return fields


def number(fields, tag, default=0):
    return int.from_bytes(fields[tag], "big") if tag in fields else default


def credential(key, audience):
    """A provider HELLO credential (7.1-1): timestamp, nonce, HMAC of context, audience and both."""
    stamp = u(8, int(time.time() * 1000)) + os.urandom(16)
    mac = hmac.new(key, b"securepush-provider-v2" + bytes([audience]) + stamp, hashlib.sha256).digest()
    return stamp + mac

# ---------------------------------------------------------------------------------------
# Commands (Appendix B.3)


TAG_RE = re.compile(r"[A-Za-z0-9_-]{1,16}")
HEX_RE = re.compile(r"(?:[0-9A-Fa-f]{2})*")
ID_RE = re.compile(r"[0-9A-Fa-f]{32}")


class Request:
    """One command's request, kept until its answer line is written."""

    def __init__(self, tag, service, message_type, reply_type, fields, safe):
        self.tag, self.service, self.type, self.reply_type = tag, service, message_type, reply_type
        self.fields, self.safe = fields, safe      # safe: may be sent again after a lost connection (5.8-5)
        self.sends = 0
        self.answered = False
        self.over_inflight = False    # fault ignore-inflight: sent with max_inflight requests outstanding

    def body(self):
        sending = self.type == M.SEND
        return encode(self.fields, descending=sending and fault("field-order"),
                      padded=sending and fault("padded-varint"))

    def render(self, fields):
        """The OK answer from a reply's fields."""
        if self.reply_type in (M.SEND_OK, M.STORE_OK):
            return "OK " + fields[T["id"]].hex()
        if self.reply_type == M.PUSH_ACK:
            return f"OK {number(fields, T['written'])} {number(fields, T['queued'])}"
        return "OK"


def parse_command(line):
    """A Request, or (tag or None, reason) for a line that does not parse."""
    words = line.split()
    if not words or not TAG_RE.fullmatch(words[0]):
        return None, "no tag"
    tag = words[0]
    if len(words) < 2:
        return tag, "no command"
    verb, args = words[1], words[2:]
    if verb in ("SEND", "STORE"):
        if len(args) < 2 or not HEX_RE.fullmatch(args[1]):
            return tag, f"{verb} needs a user and the payload in hex"
        options = {}
        for word in args[2:]:
            name, _, value = word.partition("=")
            if name not in (("ttl", "key") if verb == "SEND" else ("ttl",)) or not value or name in options:
                return tag, f"bad option {word}"
            options[name] = value
        fields = [(T["user"], args[0].encode()), (T["payload"], bytes.fromhex(args[1]))]
        if "ttl" in options:
            if not options["ttl"].isdigit() or not 0 < int(options["ttl"]) < 2**32:
                return tag, "ttl is not a number of seconds"
            fields.append((T["ttl_s"], u(4, int(options["ttl"]))))
        if "key" in options:
            fields.append((T["idempotency_key"], options["key"].encode()))
        if verb == "SEND":
            if fault("send-to-device"):
                fields += [(T["target_kind"], u(1, 1)), (T["target"], args[0].encode())]
            return Request(tag, "store", M.SEND, M.SEND_OK, fields, safe="key" in options)
        return Request(tag, "store", M.STORE, M.STORE_OK, fields, safe=fault("resend-lost-store"))
    if verb == "PUSH":
        if len(args) != 2 or not ID_RE.fullmatch(args[1]):
            return tag, "PUSH takes a user and an id of 32 hex digits"
        kind = 1 if fault("push-target-device") else 2
        fields = [(T["id"], bytes.fromhex(args[1])), (T["target_kind"], u(1, kind)), (T["target"], args[0].encode())]
        return Request(tag, "gateway", M.PUSH, M.PUSH_ACK, fields, safe=False)
    if verb == "RECALL":
        if len(args) != 1 or not ID_RE.fullmatch(args[0]):
            return tag, "RECALL takes an id of 32 hex digits"
        return Request(tag, "store", M.RECALL, M.RECALL_OK, [(T["id"], bytes.fromhex(args[0]))], safe=True)
    return tag, f"unknown command {verb}"

# ---------------------------------------------------------------------------------------
# Waits (5.8-1, 5.8-2, 5.8-4)


BASE_S, CAP_S = 0.100, 5.0
MAX_SENDS = 5            # a request is sent at most this many times, then its failure reported
GIVE_UP_AFTER = 8        # failed connects in a row (about 11 s of waits) before queued commands fail


def backoff(k):
    """The wait after the k-th failure in a row: nominal min(cap, base * 2^(k-1)), drawn 0.5x to 1.5x."""
    return min(CAP_S, BASE_S * 2 ** (k - 1)) * (1.0 if fault("no-jitter") else random.uniform(0.5, 1.5))


def retry_wait(k):
    """The wait before the k-th retry of a request refused BUSY, RATE_LIMITED or INTERNAL."""
    if fault("busy-no-backoff"):
        return 0.120
    return max(0.100, backoff(k))

# ---------------------------------------------------------------------------------------
# Connections


class Service:
    """The store or the gateway: the queue of requests waiting for a connection, the
    connection in use, those draining after GOAWAY, and the run of failed connects."""

    def __init__(self, name, address, audience):
        host, _, port = address.rpartition(":")
        self.name, self.address, self.audience = name, (host, int(port)), audience
        self.queue = collections.deque()
        self.conn = None
        self.draining = []
        self.failures = 0
        self.next_attempt = 0.0
        self.hellos = 0
        self.kept_credential = None   # fault reuse-credential


class Conn:
    """One connection to a service, from HELLO to its close."""

    def __init__(self, service, sock):
        now = time.monotonic()
        self.service, self.sock = service, sock
        self.state = "hello"           # hello -> open -> (draining) -> closed
        self.inbuf, self.out = bytearray(), bytearray()
        self.next_corr = 1             # HELLO is 1, then 2, 3, ... (5.3-3)
        self.pending = {}              # correlation -> Request
        self.pings = set()             # our keepalive PINGs outstanding
        self.peer_last = 0             # highest correlation of the server's requests we processed
        self.max_frame, self.keepalive, self.inflight = CLIENT_MAX_FRAME, 0, 1
        self.opened = self.last_sent = self.last_recv = now
        self.goaway_last = None
        self.fault_ping_at = None


class Provider:
    def __init__(self, store, gateway, key):
        self.key = key
        self.services = {"store": Service("store", store, 1), "gateway": Service("gateway", gateway, 2)}
        self.sel = selectors.DefaultSelector()
        self.sel.register(0, selectors.EVENT_READ, None)
        self.stdin_buf = b""
        self.stdin_open = True
        self.unanswered = 0
        self.retries = []              # (due, Request) refused BUSY and the like

    # --- answers ---------------------------------------------------------------------

    def answer(self, req, text):
        if req.answered:
            return
        req.answered = True
        self.unanswered -= 1
        sys.stdout.write(f"{req.tag} {text}\n")
        sys.stdout.flush()

    def refused(self, req, code):
        """A request answered ERROR `code`: retried (5.8-4) or reported."""
        busy_now = code == S["BUSY"] and (fault("no-busy-retry") or req.over_inflight)
        if code in RETRYABLE and req.sends < MAX_SENDS and not busy_now:
            self.retries.append((time.monotonic() + retry_wait(req.sends), req))
        elif req.type == M.RECALL and code == S["NOT_FOUND"] and fault("recall-not-found-ok"):
            self.answer(req, "OK")
        else:
            self.answer(req, "ERROR " + status_name(code))

    def again(self, req):
        """A request to send again on the next connection (5.8-5), while sends are left."""
        if req.sends >= MAX_SENDS:
            return self.answer(req, "ERROR DISCONNECTED")
        self.services[req.service].queue.appendleft(req)

    # --- stdin -----------------------------------------------------------------------

    def read_stdin(self):
        data = os.read(0, 65536)
        if not data:
            if fault("exit-at-eof"):
                sys.exit(0)
            self.stdin_open = False
            self.sel.unregister(0)
            data = b"\n" if self.stdin_buf else b""   # a last line without its newline
        self.stdin_buf += data
        while b"\n" in self.stdin_buf:
            raw, self.stdin_buf = self.stdin_buf.split(b"\n", 1)
            if raw.strip():
                self.command(raw)

    def command(self, raw):
        try:
            parsed = parse_command(raw.decode("utf-8"))
        except UnicodeDecodeError:                            # a user must be UTF-8 (3.3-2)
            first = raw.split()[0].decode("ascii", "replace")
            parsed = (first if TAG_RE.fullmatch(first) else None), "not UTF-8"
        if isinstance(parsed, tuple):
            tag, reason = parsed
            log(f"{tag or '?'}: {reason}")
            sys.stdout.write(f"{tag or '?'} ERROR INVALID\n")
            sys.stdout.flush()
            return
        self.unanswered += 1
        self.services[parsed.service].queue.append(parsed)

    # --- connecting ------------------------------------------------------------------

    def failed(self, service):
        """A connect that ended before HELLO_OK, or a connection ended that we did not end
        (5.8-3): the next attempt waits (5.8-1); after many, queued commands fail."""
        service.failures += 1
        wait = 0.020 if fault("no-backoff") else backoff(service.failures)
        service.next_attempt = time.monotonic() + wait
        log(f"{service.name}: failure {service.failures}, next attempt in {wait * 1000:.0f} ms")
        if service.failures >= GIVE_UP_AFTER:
            while service.queue:
                self.answer(service.queue.popleft(), "ERROR DISCONNECTED")

    def connect(self, service):
        try:
            sock = socket.create_connection(service.address, timeout=3)
        except OSError as error:
            log(f"{service.name}: cannot connect: {error}")
            return self.failed(service)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Conn(service, sock)
        service.conn = conn
        self.sel.register(sock, selectors.EVENT_READ, conn)
        service.hellos += 1
        first_gateway = service.name == "gateway" and service.hellos == 1
        audience = 1 if first_gateway and fault("wrong-audience-first") else service.audience
        cred = credential(self.key, audience)
        if fault("reuse-credential"):
            service.kept_credential = service.kept_credential or cred
            cred = service.kept_credential
        first_store = service.name == "store" and service.hellos == 1
        role = 1 if first_gateway and fault("role-device-first") else 2
        name = b"mini_provider" + (b"x" * 1100 if first_store and fault("big-hello") else b"")
        body = encode([(T["role"], u(1, role)), (T["version_min"], u(1, 1)), (T["version_max"], u(1, 1)),
                       (T["credential"], cred), (T["max_frame"], u(4, CLIENT_MAX_FRAME)),
                       (T["name"], name)])
        flags = 1 if first_gateway and fault("flags") else 0
        reserved = 1 if first_gateway and fault("reserved") else 0
        self.send(conn, M.HELLO, self.take_corr(conn), body, flags=flags, reserved=reserved)
        if fault("request-before-hello-ok") and service.name == "store" and service.hellos == 1 and service.queue:
            self.send_request(conn, service.queue.popleft())

    # --- writing ---------------------------------------------------------------------

    def take_corr(self, conn):
        corr = conn.next_corr
        conn.next_corr += 1
        return corr

    def send(self, conn, message_type, corr, body=b"", status=0, flags=0, reserved=0):
        if conn.state == "closed":
            return
        conn.out += HEADER.pack(0xA7, 1, message_type, flags, corr, status, reserved, len(body)) + body
        conn.last_sent = time.monotonic()
        self.flush(conn)

    def flush(self, conn):
        try:
            sent = conn.sock.send(conn.out)
            del conn.out[:sent]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as error:
            return self.closed(conn, f"write failed: {error}")
        self.sel.modify(conn.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0), conn)

    def send_request(self, conn, req):
        body = req.body()
        if HEADER.size + len(body) > conn.max_frame:       # the server would end the connection (2-7)
            return self.answer(req, "ERROR TOO_LARGE")
        corr = self.take_corr(conn)
        if fault("reuse-correlation") and len(conn.pending) >= 2:
            corr = max(conn.pending)
        req.over_inflight = len(conn.pending) >= conn.inflight      # only with fault ignore-inflight
        conn.pending[corr] = req
        req.sends += 1
        self.send(conn, req.type, corr, body)

    def pump(self, service):
        """Sends queued requests while the connection is open and max_inflight allows (5.3-1)."""
        conn = service.conn
        while conn and conn.state == "open" and service.queue and \
                (len(conn.pending) < conn.inflight or fault("ignore-inflight")):
            self.send_request(conn, service.queue.popleft())

    def goaway(self, conn, code):
        """A fatal fault we detected (5.6-1): GOAWAY with our last_correlation, then close."""
        if not fault("silent-fatal-close"):
            last = 0 if fault("goaway-last-zero") else conn.peer_last
            self.send(conn, M.GOAWAY, 0, encode([(T["last_correlation"], u(4, last))]), status=code)
        self.closed(conn, f"we sent GOAWAY {status_name(code)}")

    def closed(self, conn, why):
        """The connection is over: requests without an answer are sent again when 5.8-5
        allows it, and otherwise reported DISCONNECTED (their outcome is unknown)."""
        if conn.state == "closed":
            return
        was = conn.state
        conn.state = "closed"
        log(f"{conn.service.name}: connection closed ({why})")
        try:
            self.sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        service = conn.service
        lost = [conn.pending[corr] for corr in sorted(conn.pending)]
        conn.pending.clear()
        for req in reversed(lost):
            if req.safe:
                self.again(req)
            else:
                self.answer(req, "ERROR DISCONNECTED")
        if service.conn is conn:
            service.conn = None
            self.failed(service)
        elif conn in service.draining:
            service.draining.remove(conn)
        if was == "hello":
            log(f"{service.name}: the handshake did not complete")

    # --- reading ---------------------------------------------------------------------

    def readable(self, conn):
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            return self.closed(conn, f"read failed: {error}")
        if not data:
            return self.closed(conn, "end of stream")   # a partial frame left is dropped (2-12)
        conn.last_recv = time.monotonic()
        conn.inbuf += data
        while conn.state != "closed" and len(conn.inbuf) >= HEADER.size:
            magic, version, mtype, flags, corr, status, reserved, length = HEADER.unpack_from(conn.inbuf)
            # 2-11: magic, version, flags, reserved, length, all from the header (2-7).
            fatal = None
            if magic != 0xA7 and not fault("lenient-magic"):
                fatal = S["MALFORMED_FRAME"]
            elif fault("lenient-header"):
                pass
            elif version != 1:
                fatal = S["UNSUPPORTED_VERSION"]
            elif flags or reserved:
                fatal = S["MALFORMED_FRAME"]
            elif HEADER.size + length > conn.max_frame:
                fatal = S["FRAME_TOO_LARGE"]
            if fatal is not None:
                return self.goaway(conn, fatal)
            if len(conn.inbuf) < HEADER.size + length:
                return
            body = bytes(conn.inbuf[HEADER.size:HEADER.size + length])
            del conn.inbuf[:HEADER.size + length]
            self.frame(conn, mtype, corr, status, body)

    def frame(self, conn, mtype, corr, status, body):
        if mtype not in M.KNOWN:                            # 2-4: discarded unread, connection kept
            if not fault("ignore-unknown-type"):
                self.send(conn, M.ERROR, corr, status=S["UNKNOWN_TYPE"])
            return
        if conn.state == "hello":
            return self.handshake(conn, mtype, corr, status, body)
        if mtype == M.GOAWAY:
            return self.goaway_received(conn, status, body)
        if mtype in M.REQUESTS:
            conn.peer_last = max(conn.peer_last, corr)
            if status != 0 or mtype != M.PING:              # 2-10; 4.1-4: a provider serves PING only
                if fault("lenient-requests"):
                    return
                return self.send(conn, M.ERROR, corr, status=S["BAD_REQUEST"])
            if not fault("no-pong"):
                self.send(conn, M.PONG, corr)               # 4.3-1
            return
        if mtype == M.MISSED:
            return                                           # one-way, not for a provider
        self.reply(conn, mtype, corr, status, body)

    def handshake(self, conn, mtype, corr, status, body):
        """Before HELLO_OK only the answer to HELLO (correlation 1) matters."""
        service = conn.service
        if mtype == M.HELLO_OK and corr == 1 and status == 0:
            try:
                fields = decode(M.HELLO_OK, body)
            except Malformed as error:
                return self.closed(conn, f"HELLO_OK malformed: {error}")
            if number(fields, T["version"]) != 1:
                return self.closed(conn, "HELLO_OK chose a version other than 1")
            conn.max_frame = min(max(number(fields, T["max_frame"]), 1024), 16777216)
            conn.keepalive = number(fields, T["keepalive_ms"]) / 1000
            conn.inflight = max(1, number(fields, T["max_inflight"]))
            conn.state = "open"
            service.failures = 0                             # only HELLO_OK ends a run (5.8-3)
            log(f"{service.name}: HELLO_OK, keepalive {conn.keepalive}s, max_inflight {conn.inflight}")
            return self.pump(service)
        if mtype == M.GOAWAY:                                # requests above last_correlation go again
            return self.goaway_received(conn, status, body)
        if mtype == M.ERROR:
            if fault("reset-on-refusal"):
                service.failures = 0
            return self.closed(conn, f"HELLO refused with ERROR {status_name(status)}")
        # A request sent before HELLO_OK (only with a fault) may be answered here.
        if corr in conn.pending:
            self.reply(conn, mtype, corr, status, body)

    def goaway_received(self, conn, status, body):
        """4.4-2: no further request on this connection; 5.5-2 and 5.8-5: requests above
        last_correlation were not carried out and go on the next connection."""
        if status == 0 and fault("goaway-ok-ignored"):
            return
        service = conn.service
        try:
            last = number(decode(M.GOAWAY, body), T["last_correlation"])
        except Malformed:
            last = max(conn.pending, default=0)              # a malformed GOAWAY still ends it (5.6-3)
        conn.goaway_last = last
        above = sorted(corr for corr in conn.pending if corr > last)
        for corr in reversed(above):
            req = conn.pending.pop(corr)
            if fault("no-resend-above-last"):
                self.answer(req, "ERROR DISCONNECTED")
            else:
                self.again(req)
        if service.conn is conn:
            service.conn = None
            self.failed(service)
        ends = status != S["SHUTTING_DOWN"] and not (fault("goaway-stays") and status in STATUS and status != 0)
        if ends or fault("no-drain"):                        # 5.6-4: any other GOAWAY ends it now
            return self.closed(conn, f"GOAWAY {status_name(status)}")
        if conn.state != "draining":                         # 5.5-2: the replies up to last still come
            conn.state = "draining"
            service.draining.append(conn)
        if fault("ping-after-goaway"):
            conn.fault_ping_at = time.monotonic() + 0.150
        elif not conn.pending and not fault("goaway-stays"):
            self.closed(conn, "GOAWAY SHUTTING_DOWN, nothing outstanding")

    def reply(self, conn, mtype, corr, status, body):
        if corr in conn.pings:                               # the PONG to our keepalive PING
            conn.pings.discard(corr)
            return
        if fault("match-in-order") and conn.pending:
            corr = min(conn.pending)
        req = conn.pending.pop(corr, None)
        if req is None:                                      # 5.3-5: nobody waits for it
            log(f"{conn.service.name}: discarded a reply {mtype:#x} with correlation {corr}")
            if fault("close-on-stray"):
                self.closed(conn, "fault close-on-stray")
            return
        if mtype == M.ERROR and status == 0 and fault("ok-error-succeeds"):
            self.answer(req, "OK")
        elif mtype == M.ERROR:
            code = status or S["INTERNAL"]                   # ERROR with OK counts as INTERNAL (6-6)
            self.refused(req, code)
            if code not in STATUS and fault("close-on-unknown-status"):
                return self.closed(conn, "fault close-on-unknown-status")
        elif status != 0 or mtype != req.reply_type:         # 2-10, 5.6-3: the request fails
            self.answer(req, "ERROR BAD_REQUEST")
        else:
            try:
                self.answer(req, req.render(decode(mtype, body)))
            except Malformed as error:
                log(f"{req.tag}: malformed reply: {error}")
                self.answer(req, "ERROR BAD_REQUEST")
                if fault("error-on-bad-reply"):
                    self.send(conn, M.ERROR, corr, status=S["BAD_REQUEST"])
        if conn.state == "draining" and not conn.pending and not fault("ping-after-goaway"):
            self.closed(conn, "the replies owed before GOAWAY came")
        self.pump(conn.service)

    # --- time ------------------------------------------------------------------------

    def tick(self):
        now = time.monotonic()
        due = [req for at, req in self.retries if at <= now]
        self.retries = [(at, req) for at, req in self.retries if at > now]
        for req in due:
            self.services[req.service].queue.append(req)
        for service in self.services.values():
            for conn in [service.conn] + service.draining:
                if conn is not None:
                    self.timers(conn, now)
            if service.conn is None and service.queue and now >= service.next_attempt:
                self.connect(service)
            self.pump(service)

    def timers(self, conn, now):
        """Handshake deadline, silence (5.4-2) and the keepalive PING (5.4-1)."""
        if conn.state == "hello":
            if now - conn.opened >= 5.0:
                self.closed(conn, "no HELLO_OK within 5 s")
            return
        if conn.fault_ping_at is not None and now >= conn.fault_ping_at:
            conn.fault_ping_at = None
            corr = self.take_corr(conn)
            conn.pings.add(corr)
            self.send(conn, M.PING, corr)                    # fault ping-after-goaway
        if conn.keepalive <= 0:
            return
        if now - conn.last_recv >= 1.5 * conn.keepalive and not fault("no-silence-timeout"):
            return self.goaway(conn, S["TIMEOUT"])
        if conn.state == "open" and now - conn.last_sent >= conn.keepalive and not fault("no-keepalive"):
            corr = self.take_corr(conn)
            conn.pings.add(corr)                             # PING is not counted in max_inflight (5.3-4)
            self.send(conn, M.PING, corr)

    # --- the loop --------------------------------------------------------------------

    def run(self):
        while self.stdin_open or self.unanswered > 0:
            for key, events in self.sel.select(timeout=0.05):
                conn = key.data
                if conn is None:
                    self.read_stdin()
                elif conn.state != "closed":
                    if events & selectors.EVENT_WRITE:
                        self.flush(conn)
                    if events & selectors.EVENT_READ and conn.state != "closed":
                        self.readable(conn)
            self.tick()
        for service in self.services.values():           # nothing outstanding: we may just close (5.5-6)
            for conn in [service.conn] + service.draining:
                if conn is not None:
                    conn.sock.close()
        return 0


def read_key(path):
    """A key file of 7.5-1: 64 hex digits, whitespace ignored, readable by its owner only (7.5-2)."""
    if os.stat(path).st_mode & 0o077 and not fault("any-key-mode"):
        raise ValueError(f"{path} may be read by others")
    with open(path) as f:
        raw = f.read()
    text = raw.rstrip("\n") if fault("strict-key-hex") else "".join(raw.split())
    if fault("strict-key-hex") and not re.fullmatch(r"[0-9a-f]{64}", text):
        raise ValueError(f"{path} is not 64 lowercase hex digits")
    if not re.fullmatch(r"[0-9A-Fa-f]{64}", text):
        raise ValueError(f"{path} does not hold 32 bytes in hexadecimal")
    return bytes.fromhex(text)


def main():
    parser = argparse.ArgumentParser(description="a small securepush provider client (a test fixture)")
    parser.add_argument("--store")
    parser.add_argument("--gateway")
    parser.add_argument("--provider-key")
    parser.add_argument("--fault", action="append", default=[], choices=sorted(FAULTS))
    parser.add_argument("--list-faults", action="store_true")
    args = parser.parse_args()
    if args.list_faults:
        for name, text in FAULTS.items():
            print(f"{name}: {text}")
        return 0
    if not (args.store and args.gateway and args.provider_key):
        parser.error("--store, --gateway and --provider-key are required")
    ACTIVE.update(args.fault)                              # before the key file: some faults read it
    try:
        key = read_key(args.provider_key)
    except (OSError, ValueError) as error:
        log(f"cannot read the provider key: {error}")
        return 2
    log(f"started, store {args.store}, gateway {args.gateway}, faults: {' '.join(args.fault) or 'none'}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    return Provider(args.store, args.gateway, key).run()


if __name__ == "__main__":
    sys.exit(main())
