#!/usr/bin/env python3
"""Writes the golden vectors of the securepush protocol (SPEC.md section 9).

An encoder of the wire format written from the spec alone, independent of the Swift code.
Every vector is also run through the small decoder below, which implements the checks of
SPEC.md sections 2 and 3, and the script refuses to write anything if a vector's stated
outcome disagrees with it. Standard library only; deterministic, so rerunning it
regenerates the files byte for byte.

    python3 protocol/tools/gen_vectors.py            # write protocol/vectors/*
    python3 protocol/tools/gen_vectors.py --check    # fail if the files are out of date
"""

import hashlib
import hmac
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTOR_DIR = os.path.join(os.path.dirname(HERE), "vectors")

MAGIC = 0xA7
VERSION = 1
DEFAULT_MAX_FRAME = 65536

# ---------------------------------------------------------------------------------------
# Tables (SPEC.md 3.2, 4, 6)

# tag: (name, type, max length or None)
TAGS = {
    0x01: ("role", "u8", None),
    0x02: ("version_min", "u8", None),
    0x03: ("version_max", "u8", None),
    0x04: ("credential", "bytes", 1024),
    0x05: ("max_frame", "u32", None),
    0x06: ("keepalive_ms", "u32", None),
    0x07: ("max_inflight", "u32", None),
    0x08: ("version", "u8", None),
    0x09: ("name", "string", 64),
    0x0A: ("message", "string", 1024),
    0x0B: ("last_correlation", "u32", None),
    0x10: ("user", "identifier", 64),
    0x11: ("password", "bytes", 256),
    0x12: ("device_id", "identifier", 64),
    0x13: ("token", "bytes", 512),
    0x14: ("expires_at", "u64", None),
    0x15: ("id", "bytes", 64),
    0x16: ("payload", "bytes", None),
    0x17: ("ttl_s", "u32", None),
    0x18: ("read_limit", "u32", None),
    0x19: ("cursor", "u64", None),
    0x1A: ("limit", "u32", None),
    0x1B: ("ids", "bytes", None),
    0x1C: ("has_more", "u8", None),
    0x1D: ("state", "u8", None),
    0x1E: ("fetch_count", "u32", None),
    0x1F: ("fetched_at", "u64", None),
    0x20: ("created_at", "u64", None),
    0x21: ("key_suite", "u8", None),
    0x22: ("device_key", "bytes", 1216),
    0x23: ("key_id", "bytes", 8),
    0x24: ("keys", "bytes", None),
    0x25: ("sealed_payload", "bytes", None),
    0x26: ("payload_to_seal", "bytes", None),
    0x30: ("target_kind", "u8", None),
    0x31: ("target", "identifier", 64),
    0x32: ("alert", "u8", None),
    0x33: ("priority", "u8", None),
    0x34: ("collapse_key", "identifier", 64),
    0x35: ("written", "u32", None),
    0x36: ("queued", "u32", None),
    0x37: ("missed_count", "u32", None),
    0x38: ("wait_ms", "u32", None),
    0x39: ("registrations", "bytes", None),
    0x3A: ("push_ttl_s", "u32", None),
    0x3B: ("once", "u8", None),
    0x3C: ("idempotency_key", "identifier", 128),
    0x3D: ("push_state", "u8", None),
    0x3E: ("replayed", "u8", None),
    0x3F: ("older_count", "u32", None),
}
TAG = {name: tag for tag, (name, _, _) in TAGS.items()}
WIDTH = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}
# Allowed values of enumerated fields (SPEC.md 3.3-4).
ALLOWED = {
    "role": range(1, 4),
    "target_kind": range(1, 4),
    "alert": range(0, 2),
    "priority": range(0, 11),
    "has_more": range(0, 2),
    "state": range(1, 4),
    "once": range(0, 2),
    "push_state": range(0, 3),
    "replayed": range(0, 2),
    "key_suite": range(1, 3),
}
# Key suites (SPEC.md 7.6): public key and encapsulated key lengths.
KEY_SUITES = {1: (32, 32), 2: (1216, 1120)}
# STORE and SEND carry exactly one of these (SPEC.md 4.7-5); FETCH_OK one of the first two (4.8-4).
CONTENT_FIELDS = ("payload", "sealed_payload", "payload_to_seal")

R, O = True, False
# type code: (name, {field name: required})
MESSAGES = {
    0x01: ("HELLO", {"role": R, "version_min": R, "version_max": R, "credential": O,
                     "max_frame": O, "keepalive_ms": O, "max_inflight": O, "name": O}),
    0x02: ("HELLO_OK", {"max_frame": R, "keepalive_ms": R, "max_inflight": R, "version": R,
                        "name": O}),
    0x03: ("PING", {}),
    0x04: ("PONG", {}),
    0x05: ("GOAWAY", {"message": O, "last_correlation": R}),
    0x06: ("ERROR", {"message": O}),
    0x10: ("LOGIN", {"user": R, "password": R, "device_id": R, "key_suite": O, "device_key": O}),
    0x11: ("LOGIN_OK", {"token": R, "expires_at": R, "key_id": O}),
    # payload, sealed_payload and payload_to_seal: exactly one (SPEC.md 4.7-5).
    0x12: ("STORE", {"user": R, "payload": O, "ttl_s": O, "read_limit": O, "sealed_payload": O,
                     "payload_to_seal": O}),
    0x13: ("STORE_OK", {"expires_at": R, "id": R, "cursor": O}),
    0x14: ("FETCH", {"token": O, "id": R}),
    0x15: ("FETCH_OK", {"expires_at": R, "id": R, "payload": O, "created_at": R, "sealed_payload": O}),
    0x16: ("SYNC", {"token": O, "cursor": O, "limit": O}),
    0x17: ("SYNC_OK", {"cursor": R, "ids": R, "has_more": R, "older_count": O}),
    0x18: ("ACK", {"token": O, "id": R}),
    0x19: ("ACK_OK", {"id": R}),
    0x1A: ("RECALL", {"id": R}),
    0x1B: ("RECALL_OK", {"id": R}),
    0x1C: ("STATUS", {"id": R}),
    0x1D: ("STATUS_OK", {"expires_at": R, "id": R, "state": R, "fetch_count": R,
                         "fetched_at": R, "created_at": R, "written": O, "queued": O,
                         "push_state": O}),
    0x1E: ("KEYS", {"user": R}),
    0x1F: ("KEYS_OK", {"cursor": R, "keys": R}),
    # One table for both forms; target_kind/target are checked as a pair (SPEC.md 4.13-1).
    0x20: ("PUSH", {"user": O, "id": R, "ttl_s": O, "target_kind": O, "target": O, "alert": O,
                    "priority": O, "collapse_key": O, "once": O}),
    0x21: ("PUSH_ACK", {"written": R, "queued": R}),
    0x22: ("DELIVERY_ACK", {"id": R}),
    0x23: ("MISSED", {"missed_count": R}),
    0x24: ("REGISTRY", {"cursor": O, "limit": O, "wait_ms": O}),
    0x25: ("REGISTRY_OK", {"cursor": R, "has_more": R, "registrations": R}),
    # target_kind/target are checked as a pair, as in PUSH (SPEC.md 4.17-2).
    0x26: ("SEND", {"user": R, "payload": O, "sealed_payload": O, "payload_to_seal": O, "ttl_s": O, "read_limit": O, "target_kind": O,
                    "target": O, "alert": O, "priority": O, "collapse_key": O, "push_ttl_s": O,
                    "idempotency_key": O}),
    0x27: ("SEND_OK", {"expires_at": R, "id": R, "replayed": O, "cursor": O}),
}
TYPE = {name: code for code, (name, _) in MESSAGES.items()}
# Requests are answered, with ERROR when refused; replies and one-way messages never are
# (SPEC.md 4.1, 5.6-3), so a refused one is "rejected" rather than a "request_error".
REQUESTS = {"HELLO", "PING", "LOGIN", "STORE", "FETCH", "SYNC", "ACK", "RECALL", "STATUS", "PUSH",
            "REGISTRY", "SEND", "KEYS"}
STORE_ID_TYPES = {"FETCH", "ACK", "RECALL", "STATUS", "STORE_OK", "SEND_OK", "FETCH_OK", "ACK_OK",
                  "RECALL_OK", "STATUS_OK"}
STATUS = {
    "OK": 0x0000, "MALFORMED_FRAME": 0x0001, "UNSUPPORTED_VERSION": 0x0002,
    "FRAME_TOO_LARGE": 0x0003, "HELLO_REQUIRED": 0x0004, "UNKNOWN_TYPE": 0x0005,
    "BAD_REQUEST": 0x0006, "TIMEOUT": 0x0007, "AUTH_REQUIRED": 0x0010,
    "TOKEN_EXPIRED": 0x0011, "BAD_TOKEN": 0x0012, "BAD_CREDENTIALS": 0x0013,
    "FORBIDDEN": 0x0014, "NOT_FOUND": 0x0015, "GONE": 0x0016, "UNKNOWN_USER": 0x0017,
    "TOO_LARGE": 0x0018, "RATE_LIMITED": 0x0019, "BUSY": 0x001A, "SHUTTING_DOWN": 0x001B,
    "REPLACED": 0x001C, "SLOW_CONSUMER": 0x001D, "REVOKED": 0x001E, "CONFLICT": 0x001F,
    "NOT_SEALED_FOR_DEVICE": 0x0020, "NO_DEVICE_KEYS": 0x0021, "INTERNAL": 0x00FF,
}
STATUS_NAME = {code: name for name, code in STATUS.items()}

# ---------------------------------------------------------------------------------------
# Encoder


def varint(n, width=None):
    """Unsigned LEB128; `width` pads to that many bytes (non-minimal, for vectors only)."""
    out = []
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte)
        if n == 0:
            break
    if width is not None:
        assert width >= len(out)
        out += [0] * (width - len(out))
    for i in range(len(out) - 1):
        out[i] |= 0x80
    return bytes(out)


def value_bytes(tag, value):
    """A Python value as the wire value of `tag`: int for integers, str or bytes otherwise."""
    kind = TAGS[tag][1] if tag in TAGS else "bytes"
    if isinstance(value, bytes):
        return value
    if kind in WIDTH:
        return value.to_bytes(WIDTH[kind], "big")
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError((tag, value))


def tag_of(key):
    return key if isinstance(key, int) else TAG[key]


def body(*fields):
    """Fields as (tag or name, value); a third item overrides the varint byte width."""
    out = b""
    for item in fields:
        tag = tag_of(item[0])
        val = value_bytes(tag, item[1])
        width = item[2] if len(item) > 2 else None
        out += bytes([tag]) + varint(len(val), width) + val
    return out


def frame(type_, correlation, payload=b"", status="OK", magic=MAGIC, version=VERSION,
          flags=0, reserved=0, length=None):
    code = TYPE[type_] if isinstance(type_, str) else type_
    st = STATUS[status] if isinstance(status, str) else status
    if length is None:
        length = len(payload)
    return struct.pack(">BBBBIHHI", magic, version, code, flags, correlation, st, reserved,
                       length) + payload

# ---------------------------------------------------------------------------------------
# Reference decoder: one frame, no connection state (SPEC.md 2, 3, 9-1)


class Reject(Exception):
    pass


def list_fields(data):
    """(tag, value) pairs in wire order; Reject on broken TLV (SPEC.md 3.1)."""
    fields, i = [], 0
    while i < len(data):
        tag = data[i]
        i += 1
        n, shift = 0, 0
        for count in range(4):
            if i >= len(data):
                raise Reject("body ends inside a varint")
            byte = data[i]
            i += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
            if count == 3:
                raise Reject("varint longer than 4 bytes")
        if n > len(data) - i:
            raise Reject("field runs past the body")
        fields.append((tag, data[i:i + n]))
        i += n
    return fields


def check_body(type_name, table, data):
    seen = {}
    for tag, val in list_fields(data):
        name = TAGS[tag][0] if tag in TAGS else None
        if name not in table:
            if type_name == "PUSH":
                raise Reject("field 0x%02x not allowed in PUSH" % tag)
            continue  # unknown, or known but not in this message: skipped unchecked
        if name in seen:
            raise Reject("duplicate " + name)
        kind, limit = TAGS[tag][1], TAGS[tag][2]
        if kind in WIDTH:
            if len(val) != WIDTH[kind]:
                raise Reject("wrong width for " + name)
            if name in ALLOWED and int.from_bytes(val, "big") not in ALLOWED[name]:
                raise Reject("value out of range for " + name)
        else:
            if limit is not None and len(val) > limit:
                raise Reject(name + " too long")
            if kind in ("string", "identifier"):
                try:
                    text = val.decode("utf-8", errors="strict")
                except UnicodeDecodeError:
                    raise Reject("invalid UTF-8 in " + name)
                # 3.3-8: an identifier holds no code point of category Cc (C0, DEL, C1).
                if kind == "identifier" and any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text):
                    raise Reject("control character in " + name)
        seen[name] = val
    for name, required in table.items():
        if required and name not in seen:
            raise Reject("missing " + name)
    if type_name in STORE_ID_TYPES and len(seen["id"]) != 16:
        raise Reject("store id not 16 bytes")
    if "ids" in seen and len(seen["ids"]) % 16:
        raise Reject("ids not a multiple of 16")
    if "registrations" in seen:
        split_registrations(seen["registrations"])
    if "keys" in seen:
        split_keys(seen["keys"])
    if type_name in ("STORE", "SEND", "FETCH_OK"):
        present = [name for name in CONTENT_FIELDS if name in seen]
        if len(present) != 1:
            raise Reject("exactly one content field, got %s" % present)
    if type_name == "LOGIN":
        if ("key_suite" in seen) != ("device_key" in seen):
            raise Reject("key_suite and device_key must come together")
        if "key_suite" in seen and len(seen["device_key"]) != KEY_SUITES[seen["key_suite"][0]][0]:
            raise Reject("device_key length is not its suite's")
    if "key_id" in seen and len(seen["key_id"]) != 8:
        raise Reject("key_id not 8 bytes")
    if type_name in ("PUSH", "SEND"):
        if ("target_kind" in seen) != ("target" in seen):
            raise Reject("target_kind and target must come together")
    if type_name == "PUSH":
        if not seen["id"]:
            raise Reject("empty PUSH id")


# Registry entries (SPEC.md 4.16-2, 3.3-7): state u8, length u16, credential.
ENTRY_STATES = {1: "enrolled", 2: "revoked"}
ENTRY_MAX_CREDENTIAL = 1024


def split_registrations(value):
    """[(state, credential)] from a registrations value; Reject unless it splits exactly."""
    entries, i = [], 0
    while i < len(value):
        if len(value) - i < 3:
            raise Reject("registrations: %d stray bytes" % (len(value) - i))
        state, length = value[i], int.from_bytes(value[i + 1:i + 3], "big")
        if state not in ENTRY_STATES:
            raise Reject("registrations: state %d" % state)
        if not 1 <= length <= ENTRY_MAX_CREDENTIAL:
            raise Reject("registrations: credential length %d" % length)
        if length > len(value) - i - 3:
            raise Reject("registrations: entry runs past the value")
        entries.append((state, value[i + 3:i + 3 + length]))
        i += 3 + length
    return entries


def split_keys(value):
    """[(device_id, suite, key_id, key)] from a keys value (SPEC.md 4.18-2); Reject unless exact."""
    entries, i = [], 0
    def take(n):
        nonlocal i
        if n > len(value) - i:
            raise Reject("keys: entry runs past the value")
        i += n
        return value[i - n:i]
    while i < len(value):
        name = take(take(1)[0])
        if not name:
            raise Reject("keys: empty device id")
        suite = take(1)[0]
        if suite not in KEY_SUITES:
            raise Reject("keys: suite %d" % suite)
        key_id = take(8)
        key = take(int.from_bytes(take(2), "big"))
        if len(key) != KEY_SUITES[suite][0]:
            raise Reject("keys: key length is not its suite's")
        entries.append((name, suite, key_id, key))
    return entries


def key_entries(*entries):
    out = b""
    for name, suite, key_id, key in entries:
        out += bytes([len(name)]) + name + bytes([suite]) + key_id + len(key).to_bytes(2, "big") + key
    return out


def decode(data, max_frame):
    if len(data) < 16:
        return ("incomplete",)
    magic, version, code, flags, corr, status, reserved, length = struct.unpack(
        ">BBBBIHHI", data[:16])
    if magic != MAGIC:
        return ("fatal", "MALFORMED_FRAME")
    if version != VERSION:
        return ("fatal", "UNSUPPORTED_VERSION")
    if flags or reserved:
        return ("fatal", "MALFORMED_FRAME")
    if 16 + length > max_frame:
        return ("fatal", "FRAME_TOO_LARGE")
    if len(data) < 16 + length:
        return ("incomplete",)
    assert len(data) == 16 + length, "a vector holds exactly one frame"
    payload = data[16:]
    if code not in MESSAGES:
        return ("request_error", "UNKNOWN_TYPE")
    type_name, table = MESSAGES[code]
    refused = "request_error" if type_name in REQUESTS else "rejected"
    if status != 0 and type_name not in ("ERROR", "GOAWAY"):
        return (refused, "BAD_REQUEST")
    try:
        check_body(type_name, table, payload)
    except Reject:
        return (refused, "BAD_REQUEST")
    fields = [(field_name(tag), val) for tag, val in list_fields(payload)]
    return ("message", type_name, corr, STATUS_NAME[status], fields)


def field_name(tag):
    return TAGS[tag][0] if tag in TAGS else "tag_0x%02x" % tag

# ---------------------------------------------------------------------------------------
# Credentials (SPEC.md 7), with fixed example keys and times


def hkdf_sha256(ikm, info, length=32, salt=b""):
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def signed_credential(key, *fields):
    signed = b"\x01" + body(*fields)
    return signed + hmac.new(key, signed, hashlib.sha256).digest()


AUDIENCE_STORE, AUDIENCE_GATEWAY = 1, 2


def hello_credential(key, context, audience, timestamp_ms, nonce):
    stamp = timestamp_ms.to_bytes(8, "big") + nonce
    assert len(nonce) == 16
    return stamp + hmac.new(key, context + bytes([audience]) + stamp, hashlib.sha256).digest()


def provider_credential(key, timestamp_ms, nonce, audience=AUDIENCE_STORE):
    return hello_credential(key, b"securepush-provider-v2", audience, timestamp_ms, nonce)


SERVER_KEY = bytes(range(0x00, 0x20))
PROVIDER_KEY = bytes(range(0x20, 0x40))
FETCH_KEY = hkdf_sha256(SERVER_KEY, b"securepush fetch-token v1")
REGISTRATION_KEY = hkdf_sha256(SERVER_KEY, b"securepush registration v1")
ISSUED_AT = 1700000000000               # 2023-11-14T22:13:20Z
TOKEN_EXPIRES_AT = ISSUED_AT + 86400000  # one day later
REGISTRATION_EXPIRES_AT = ISSUED_AT + 365 * 86400000
FETCH_TOKEN = signed_credential(
    FETCH_KEY, ("user", "alice"), ("device_id", "phone-1"), ("expires_at", TOKEN_EXPIRES_AT),
    (0x41, ISSUED_AT.to_bytes(8, "big")))
REGISTRATION_TAGS = b"news\noncall"
REGISTRATION = signed_credential(
    REGISTRATION_KEY, ("user", "alice"), ("device_id", "phone-1"),
    ("expires_at", REGISTRATION_EXPIRES_AT), (0x40, REGISTRATION_TAGS),
    (0x41, ISSUED_AT.to_bytes(8, "big")))
# The registration phone-1 had before it was enrolled again (REGISTRATION): a day older, no tags.
EARLIER_ISSUED_AT = ISSUED_AT - 86400000
EARLIER_REGISTRATION = signed_credential(
    REGISTRATION_KEY, ("user", "alice"), ("device_id", "phone-1"),
    ("expires_at", EARLIER_ISSUED_AT + 365 * 86400000), (0x41, EARLIER_ISSUED_AT.to_bytes(8, "big")))
CREDENTIAL_NONCE = bytes(range(0x40, 0x50))
PROVIDER_CREDENTIAL = provider_credential(PROVIDER_KEY, ISSUED_AT, CREDENTIAL_NONCE)
GATEWAY_AUDIENCE_NONCE = bytes(range(0x60, 0x70))
PROVIDER_CREDENTIAL_FOR_GATEWAY = provider_credential(PROVIDER_KEY, ISSUED_AT, GATEWAY_AUDIENCE_NONCE,
                                                      audience=AUDIENCE_GATEWAY)
GATEWAY_KEY = hkdf_sha256(SERVER_KEY, b"securepush gateway v1")
GATEWAY_NONCE = bytes(range(0x50, 0x60))
GATEWAY_CREDENTIAL = hello_credential(GATEWAY_KEY, b"securepush-gateway-v1", AUDIENCE_STORE, ISSUED_AT, GATEWAY_NONCE)

# The longest registration an issuer may write (SPEC.md 7.4-3): tags of 64 bytes, and a
# last shorter one, bring it to exactly 896 bytes.
LONGEST_REGISTRATION_BYTES = 896


def longest_registration():
    def signed(tags):
        return signed_credential(
            REGISTRATION_KEY, ("user", "alice"), ("device_id", "phone-1"),
            ("expires_at", REGISTRATION_EXPIRES_AT), (0x40, tags),
            (0x41, ISSUED_AT.to_bytes(8, "big")))
    names = []
    while True:
        names.append(b"tag-%02d-" % len(names) + b"x" * 57)
        tags = b"\n".join(names)
        short = LONGEST_REGISTRATION_BYTES - len(signed(tags))
        if short <= 65:
            break
    last = b"last-" + b"y" * (short - 1 - 5)
    credential = signed(tags + b"\n" + last)
    assert len(credential) == LONGEST_REGISTRATION_BYTES, len(credential)
    assert all(1 <= len(n) <= 64 for n in names + [last])
    return credential


LONGEST_REGISTRATION = longest_registration()


def credentials_text():
    lines = [
        "# Worked example of SPEC.md section 7. Generated by protocol/tools/gen_vectors.py;",
        "# do not edit. Lines are NAME VALUE; hex values are lowercase, text values plain.",
        "# The fetch token, registration and HELLO credentials appear in the .vec files.",
        "",
        "server_key " + SERVER_KEY.hex(),
        "fetch_key " + FETCH_KEY.hex(),
        "registration_key " + REGISTRATION_KEY.hex(),
        "provider_key " + PROVIDER_KEY.hex(),
        "",
        "# fetch token (7.3): user alice, device_id phone-1",
        "fetch_token.issued_at %d" % ISSUED_AT,
        "fetch_token.expires_at %d" % TOKEN_EXPIRES_AT,
        "fetch_token " + FETCH_TOKEN.hex(),
        "",
        "# registration (7.4): user alice, device_id phone-1, tags news and oncall",
        "registration.issued_at %d" % ISSUED_AT,
        "registration.expires_at %d" % REGISTRATION_EXPIRES_AT,
        "registration.tags " + REGISTRATION_TAGS.hex(),
        "registration " + REGISTRATION.hex(),
        "",
        "# the registration phone-1 had before it was enrolled again (7.4, 4.16-6): no tags",
        "earlier_registration.issued_at %d" % EARLIER_ISSUED_AT,
        "earlier_registration.expires_at %d" % (EARLIER_ISSUED_AT + 365 * 86400000),
        "earlier_registration " + EARLIER_REGISTRATION.hex(),
        "",
        "# provider credential (7.1) for the store (audience 1)",
        "provider_credential.timestamp %d" % ISSUED_AT,
        "provider_credential.nonce " + CREDENTIAL_NONCE.hex(),
        "provider_credential " + PROVIDER_CREDENTIAL.hex(),
        "",
        "# provider credential (7.1) for the gateway (audience 2)",
        "provider_credential_gateway.timestamp %d" % ISSUED_AT,
        "provider_credential_gateway.nonce " + GATEWAY_AUDIENCE_NONCE.hex(),
        "provider_credential_gateway " + PROVIDER_CREDENTIAL_FOR_GATEWAY.hex(),
        "",
        "# gateway credential (7.1) for the store (audience 1), under the gateway key (7.4-5)",
        "gateway_key " + GATEWAY_KEY.hex(),
        "gateway_credential.timestamp %d" % ISSUED_AT,
        "gateway_credential.nonce " + GATEWAY_NONCE.hex(),
        "gateway_credential " + GATEWAY_CREDENTIAL.hex(),
    ]
    return "\n".join(lines) + "\n"

# ---------------------------------------------------------------------------------------
# The vectors

ID1 = bytes.fromhex("5e1f0c2a9b7d4e3f8a6b1c0d2e4f6a7b")

# Sealed payloads (SPEC.md 7.6): example device keys and a sealed payload's structure.
X25519_KEY = bytes(range(0x40, 0x60))
X25519_KEY_TABLET = bytes(range(0x60, 0x80))


def key_id(suite, device_id, key):
    digest = hashlib.sha256(b"securepush device key id v1" + bytes([suite, len(device_id)]) + device_id + key)
    return digest.digest()[:8]


KEY_ID_PHONE = key_id(1, b"phone-1", X25519_KEY)
KEY_ID_TABLET = key_id(1, b"tablet", X25519_KEY_TABLET)
# version 01, seal_nonce, one stanza (suite 1, key id, enc 32, wrapped key 48), body (text + tag)
SEALED_EXAMPLE = (b"\x01" + bytes(range(16)) + b"\x01" + b"\x01" + KEY_ID_PHONE + bytes([0xE0] * 32)
                  + bytes([0xC0] * 48) + bytes([0xB0] * 33))
ID2 = bytes.fromhex("0f9e8d7c6b5a49382716f5e4d3c2b1a0")
ID3 = bytes.fromhex("a1b2c3d4e5f60718293a4b5c6d7e8f90")
CREATED_AT = ISSUED_AT + 5000
EXPIRES_AT = CREATED_AT + 3600 * 1000

FILES = {}   # file name -> (title, [vector])
_current = None


def section(file_name, title):
    global _current
    _current = file_name
    FILES[file_name] = (title, [])


def vector(name, clauses, data, expect, note=None, max_frame=None, fields=None):
    FILES[_current][1].append(dict(name=name, clauses=clauses.split(), data=data,
                                   expect=expect, note=note, max_frame=max_frame,
                                   fields=fields))


def msg(name, clauses, type_, correlation, *fields, note=None, status="OK", max_frame=None,
        raw_body=None):
    """A valid message; fields as for body(). The listed fields are exactly those written."""
    payload = raw_body if raw_body is not None else body(*fields)
    data = frame(type_, correlation, payload, status=status)
    vector(name, clauses, data, ("message", type_, correlation, status), note=note,
           max_frame=max_frame, fields=list_fields(payload))


def bad(name, clauses, type_, *fields, correlation=1, note=None):
    """A well-delimited frame whose body must be refused with BAD_REQUEST: answered with
    ERROR if it is a request, never answered if it is a reply or one-way (SPEC.md 9-6, 9-7)."""
    if type_ in REQUESTS:
        expect = ("request_error", "BAD_REQUEST")
    else:
        expect = ("rejected", "BAD_REQUEST")
        clauses += " 5.6-3"
    vector(name, clauses, frame(type_, correlation, body(*fields)), expect, note=note)


def header_only(name, clauses, data, expect, note=None, max_frame=None):
    vector(name, clauses, data, expect, note=note, max_frame=max_frame)


PING7 = frame("PING", 7)

# --- header.vec -------------------------------------------------------------------------
section("header.vec", "frame header: magic, version, flags, reserved, length, type, status")

msg("header_ping", "2-1 4.3-1", "PING", 7, note="the smallest frame: a header and no body")
msg("header_correlation_max", "2-9", "PONG", 0xFFFFFFFF,
    note="every u32 is a valid correlation id")
header_only("header_truncated_7_bytes", "2-12", PING7[:7], ("incomplete",),
            note="7 of 16 header bytes: nothing can be decided yet")
header_only("header_truncated_15_bytes", "2-12", PING7[:15], ("incomplete",))
header_only("header_only_body_missing", "2-12", frame("LOGIN", 3, length=20), ("incomplete",),
            note="a valid header announcing 20 body bytes, none of which has arrived")
header_only("body_truncated", "2-1 2-12",
            frame("FETCH", 5, body(("id", ID1)))[:-4], ("incomplete",),
            note="a FETCH missing the last 4 bytes of its body")
header_only("bad_magic", "2-2", frame("PING", 7, magic=0xA8), ("fatal", "MALFORMED_FRAME"))
header_only("bad_magic_http_request", "2-2", b"GET / HTTP/1.1\r\n", ("fatal", "MALFORMED_FRAME"),
            note="a stray HTTP client: 'G' is not the magic byte")
header_only("bad_version_2", "2-3", frame("PING", 7, version=2),
            ("fatal", "UNSUPPORTED_VERSION"))
header_only("bad_version_0", "2-3", frame("PING", 7, version=0),
            ("fatal", "UNSUPPORTED_VERSION"))
header_only("flags_bit0_set", "2-5", frame("PING", 7, flags=0x01), ("fatal", "MALFORMED_FRAME"))
header_only("flags_bit7_set", "2-5", frame("PING", 7, flags=0x80), ("fatal", "MALFORMED_FRAME"))
header_only("reserved_low_byte_set", "2-6", frame("PING", 7, reserved=0x0001),
            ("fatal", "MALFORMED_FRAME"))
header_only("reserved_high_byte_set", "2-6", frame("PING", 7, reserved=0x0100),
            ("fatal", "MALFORMED_FRAME"))
header_only("length_over_negotiated_max", "2-7 2-8", frame("HELLO", 1, length=2000),
            ("fatal", "FRAME_TOO_LARGE"), max_frame=1024,
            note="max frame 1024, length 2000: refused from the header, no body is sent")
header_only("length_one_over_max", "2-7", frame("PING", 2, length=1009),
            ("fatal", "FRAME_TOO_LARGE"), max_frame=1024, note="16 + 1009 = 1025 > 1024")
header_only("length_over_default_max", "2-7 2-8", frame("STORE", 2, length=65521),
            ("fatal", "FRAME_TOO_LARGE"), note="16 + 65521 = 65537 > 65536, the default")
header_only("length_ffffffff", "2-7", frame("PING", 2, length=0xFFFFFFFF),
            ("fatal", "FRAME_TOO_LARGE"), note="must be refused without allocating 4 GiB")
msg("frame_exactly_max", "2-7 2-8 3.4-2", "PING", 3, (0x7E, bytes(range(256)) * 3 + bytes(237)),
    max_frame=1024,
    note="16 + 1008 = 1024 bytes, exactly the maximum: accepted (the field is unknown)")
header_only("unknown_type_0x7f_with_body", "2-4 9-6",
            frame(0x7F, 11, bytes.fromhex("ff ff 00 01 02 03")), ("request_error", "UNKNOWN_TYPE"),
            note="skipped whole; the body is not parsed, so its garbage does not matter")
header_only("unknown_type_0x00", "2-4", frame(0x00, 12), ("request_error", "UNKNOWN_TYPE"))
header_only("unknown_type_0x28", "2-4", frame(0x28, 13, body(("missed_count", 1))),
            ("request_error", "UNKNOWN_TYPE"), note="the code after SEND_OK")
header_only("check_order_magic_first", "2-11", frame("PING", 7, magic=0x00, version=2),
            ("fatal", "MALFORMED_FRAME"), note="bad magic and bad version: magic wins")
header_only("check_order_version_before_flags", "2-11", frame("PING", 7, version=2, flags=1),
            ("fatal", "UNSUPPORTED_VERSION"))
header_only("check_order_length_before_type", "2-11", frame(0x7F, 7, length=5000),
            ("fatal", "FRAME_TOO_LARGE"), max_frame=1024,
            note="unknown type and oversized: the header checks come first")
header_only("check_order_type_before_status", "2-11", frame(0x7F, 7, status="BAD_REQUEST"),
            ("request_error", "UNKNOWN_TYPE"))
header_only("nonzero_status_in_ping", "2-10", frame("PING", 7, status="BAD_REQUEST"),
            ("request_error", "BAD_REQUEST"))
header_only("nonzero_status_in_fetch", "2-10",
            frame("FETCH", 8, body(("token", FETCH_TOKEN), ("id", ID1)), status="NOT_FOUND"),
            ("request_error", "BAD_REQUEST"))
header_only("nonzero_status_in_reply", "2-10 9-7",
            frame("ACK_OK", 8, body(("id", ID1)), status="GONE"),
            ("rejected", "BAD_REQUEST"),
            note="replies carry OK too; failures travel in ERROR. Never answered: the ACK fails")
header_only("nonzero_status_in_missed", "2-10 5.6-3 9-7",
            frame("MISSED", 0, body(("missed_count", 2)), status="BUSY"),
            ("rejected", "BAD_REQUEST"), note="a one-way message with a status: discarded unanswered")

# --- connection.vec ---------------------------------------------------------------------
section("connection.vec", "HELLO, HELLO_OK, PING, PONG, GOAWAY, ERROR")

msg("hello_device_store", "4.2-1 4.2-3 5.1-1", "HELLO", 1,
    ("role", 1), ("version_min", 1), ("version_max", 1),
    note="a device opening a store connection: no credential")
msg("hello_device_gateway", "4.2-2 7.4-1 5.2-3", "HELLO", 1,
    ("role", 1), ("version_min", 1), ("version_max", 1), ("credential", REGISTRATION),
    ("max_frame", 262144), ("keepalive_ms", 20000), ("max_inflight", 32),
    ("name", "securepush-device/1.0"),
    note="a device opening a gateway connection with the registration of credentials.txt")
msg("hello_provider", "4.2-2 7.1-1 7.1-3", "HELLO", 1,
    ("role", 2), ("version_min", 1), ("version_max", 1), ("credential", PROVIDER_CREDENTIAL),
    ("name", "securepush-send"),
    note="a provider with the provider credential of credentials.txt")
msg("hello_credential_300_bytes", "3.1-2 3.3-3", "HELLO", 2,
    ("role", 1), ("version_min", 1), ("version_max", 1),
    ("credential", bytes((i * 7) & 0xFF for i in range(300))),
    note="a 300-byte value: its length is the two-byte varint ac 02")
msg("hello_version_range", "5.2-1", "HELLO", 1,
    ("role", 2), ("version_min", 1), ("version_max", 3), ("credential", PROVIDER_CREDENTIAL),
    note="a client speaking versions 1 to 3; the server picks 1")
msg("hello_ok", "5.2-3 5.2-5 5.2-6", "HELLO_OK", 1,
    ("max_frame", 65536), ("keepalive_ms", 30000), ("max_inflight", 64), ("version", 1),
    ("name", "securepush-store"))
msg("hello_ok_keepalive_off", "5.2-5", "HELLO_OK", 1,
    ("max_frame", 1048576), ("keepalive_ms", 0), ("max_inflight", 1), ("version", 1))
msg("ping_keepalive", "4.3-1 5.4-1", "PING", 900)
msg("pong", "4.3-1", "PONG", 900)
msg("hello_longest_before_hello_ok", "5.1-7 7.4-3 2-8", "HELLO", 1,
    ("role", 1), ("version_min", 1), ("version_max", 1), ("credential", LONGEST_REGISTRATION),
    ("max_frame", 65536), ("keepalive_ms", 30000), ("max_inflight", 64), ("name", "n" * 64),
    max_frame=1024,
    note="every HELLO field at its longest with an 896-byte registration: 1008 bytes, "
         "within the 1024 a server accepts before HELLO_OK")
header_only("hello_over_1024_before_hello_ok", "5.1-7 2-8", frame("HELLO", 1, length=1009),
            ("fatal", "FRAME_TOO_LARGE"), max_frame=1024,
            note="a 1025-byte HELLO: refused from its header before HELLO_OK; no body follows")
msg("goaway_shutting_down", "4.4-1 5.5-1 6-5", "GOAWAY", 0,
    ("message", "restarting"), ("last_correlation", 41), status="SHUTTING_DOWN",
    note="replies to requests 1 to 41 still follow; requests above 41 were not carried out")
msg("goaway_timeout", "5.4-2 2-9", "GOAWAY", 0, ("last_correlation", 0), status="TIMEOUT")
msg("goaway_timeout_handshake", "5.1-6 4.4-4", "GOAWAY", 0,
    ("message", "HELLO was not completed within 5000 ms"), ("last_correlation", 0),
    status="TIMEOUT", note="the handshake deadline passed: no HELLO was accepted, so 0")
msg("goaway_timeout_frame_deadline", "5.4-5 4.4-5", "GOAWAY", 0,
    ("message", "a frame was not completed within 10000 ms"), ("last_correlation", 17),
    status="TIMEOUT", note="requests up to 17 were processed; the unfinished frame never counts")
msg("goaway_hello_required", "5.1-2 4.4-4 5.1-5", "GOAWAY", 0, ("last_correlation", 0),
    status="HELLO_REQUIRED",
    note="the answer to any first frame but HELLO, even one of unknown type; it was not processed")
msg("goaway_frame_too_large", "5.6-1", "GOAWAY", 0,
    ("message", "frame of 2016 bytes over the 1024-byte limit"), ("last_correlation", 12),
    status="FRAME_TOO_LARGE")
msg("goaway_replaced", "5.5-3 4.4-5", "GOAWAY", 0, ("last_correlation", 7), status="REPLACED",
    note="the older connection had processed requests up to 7")
msg("goaway_slow_consumer", "5.5-4 4.4-5", "GOAWAY", 0, ("last_correlation", 2),
    status="SLOW_CONSUMER", note="the gateway's own output (PUSH, MISSED) passed its cap")
msg("goaway_status_ok", "6-4 6-6", "GOAWAY", 0, ("last_correlation", 3),
    note="a well-formed frame that breaks 6-4: the connection ends, outstanding requests fail "
         "with INTERNAL")
msg("goaway_unsupported_version", "5.2-1", "GOAWAY", 0, ("last_correlation", 0),
    status="UNSUPPORTED_VERSION")
msg("error_bad_request", "4.5-1 5.6-2", "ERROR", 9, ("message", "duplicate field id"),
    status="BAD_REQUEST")
msg("error_not_found", "4.5-1 8-3", "ERROR", 12, status="NOT_FOUND",
    note="ERROR with no text: the status is all that counts")
msg("error_busy", "5.3-4", "ERROR", 100, status="BUSY")
msg("error_unknown_type", "2-4 5.6-2", "ERROR", 11, status="UNKNOWN_TYPE",
    note="the answer to unknown_type_0x7f_with_body")
msg("error_bad_credentials", "4.2-4 4.6-2", "ERROR", 1, status="BAD_CREDENTIALS")
msg("error_status_ok", "6-4 6-6", "ERROR", 5, ("message", "nothing went wrong"),
    note="a well-formed frame that breaks 6-4: request 5 fails with INTERNAL")
msg("error_conflict", "4.17-5 6-3", "ERROR", 14,
    ("message", "idempotency key reused for another SEND"), status="CONFLICT",
    note="not fatal: the connection stays open")
msg("error_rate_limited_bad_tokens", "8-9", "ERROR", 30, status="RATE_LIMITED",
    note="a FETCH from an address that got more than 20 BAD_TOKEN answers in 10 s")

# --- store.vec --------------------------------------------------------------------------
section("store.vec", "LOGIN, STORE, SEND, FETCH, SYNC, ACK, RECALL, STATUS and their replies")

msg("login", "4.6-1", "LOGIN", 1,
    ("user", "alice"), ("password", b"correct horse battery staple"), ("device_id", "phone-1"))
msg("login_ok", "4.6-1 7.3-1", "LOGIN_OK", 1,
    ("token", FETCH_TOKEN), ("expires_at", TOKEN_EXPIRES_AT),
    note="the fetch token of credentials.txt")
msg("store", "4.7-1 4.7-4", "STORE", 2,
    ("user", "alice"), ("payload", b"Your test results are ready: HbA1c 5.4%"),
    ("ttl_s", 3600), ("read_limit", 1))
msg("store_defaults", "4.7-1 3.4-5", "STORE", 3,
    ("user", "alice"), ("payload", b"\x00\x01\x02 binary is fine"),
    note="ttl_s and read_limit absent: 86400 and 0")
msg("store_ok", "4.7-2 3.3-6", "STORE_OK", 2, ("expires_at", EXPIRES_AT), ("id", ID1))
msg("fetch", "4.8-1", "FETCH", 4, ("token", FETCH_TOKEN), ("id", ID1))
msg("fetch_without_token", "4.8-2", "FETCH", 5, ("id", ID1),
    note="decodes fine: the store answers AUTH_REQUIRED, not BAD_REQUEST")
msg("fetch_ok", "4.8-1 4.8-3", "FETCH_OK", 4,
    ("expires_at", EXPIRES_AT), ("id", ID1),
    ("payload", b"Your test results are ready: HbA1c 5.4%"), ("created_at", CREATED_AT))
msg("login_with_key", "4.6-5 4.6-6", "LOGIN", 1,
    ("user", "alice"), ("password", b"correct horse battery staple"), ("device_id", "phone-1"),
    ("key_suite", 1), ("device_key", X25519_KEY),
    note="the device's X25519 public key (suite 1), registered with the login")
msg("login_ok_with_key_id", "4.6-8 7.6-2", "LOGIN_OK", 1,
    ("token", FETCH_TOKEN), ("expires_at", TOKEN_EXPIRES_AT), ("key_id", KEY_ID_PHONE),
    note="key_id = SHA-256(\"securepush device key id v1\" || 01 || 07 \"phone-1\" || device_key)[0..8]")
msg("keys", "4.18-1", "KEYS", 8, ("user", "alice"))
msg("keys_ok", "4.18-1 4.18-2 4.18-3", "KEYS_OK", 8,
    ("cursor", 42), ("keys", key_entries((b"phone-1", 1, KEY_ID_PHONE, X25519_KEY),
                                          (b"tablet", 1, KEY_ID_TABLET, X25519_KEY_TABLET))),
    note="two entries in device id byte order, back to back")
msg("keys_ok_empty", "4.18-1 4.18-2", "KEYS_OK", 8, ("cursor", 0), ("keys", b""),
    note="a user with no keyed device: an empty keys value")
msg("store_sealed", "4.7-5 4.19-1", "STORE", 9,
    ("user", "alice"), ("ttl_s", 3600), ("sealed_payload", SEALED_EXAMPLE),
    note="a sealed payload of 7.6 with one stanza; its structure, not its cryptography")
msg("store_ok_sealed", "4.19-2 4.18-5", "STORE_OK", 9, ("expires_at", EXPIRES_AT), ("id", ID1), ("cursor", 42))
msg("send_to_seal", "4.7-5 4.19-6", "SEND", 10,
    ("user", "alice"), ("payload_to_seal", b"Your code is 4711"),
    note="plain content the store seals to the audience's device keys before its commit")
msg("fetch_ok_sealed", "4.8-4 4.19-4", "FETCH_OK", 11,
    ("expires_at", EXPIRES_AT), ("id", ID1), ("created_at", CREATED_AT), ("sealed_payload", SEALED_EXAMPLE),
    note="the device's view: its one stanza and the body")
msg("error_not_sealed_for_device", "4.19-4", "ERROR", 11, status="NOT_SEALED_FOR_DEVICE",
    note="not fatal: the device shows the generic prompt")
msg("error_no_device_keys", "4.19-6", "ERROR", 10, status="NO_DEVICE_KEYS")
msg("sync", "4.9-1 4.9-2", "SYNC", 6, ("token", FETCH_TOKEN), ("cursor", 42), ("limit", 50))
msg("sync_empty_body", "4.9-1 3.4-5", "SYNC", 7,
    note="no required fields, so an empty body is a valid SYNC (it will get AUTH_REQUIRED)")
msg("sync_ok", "4.9-2 3.3-5", "SYNC_OK", 6,
    ("cursor", 45), ("ids", ID1 + ID2 + ID3), ("has_more", 1))
msg("sync_ok_older_count", "4.9-1 4.9-5", "SYNC_OK", 9,
    ("cursor", 45), ("ids", ID3 + ID2), ("has_more", 1), ("older_count", 1600000),
    note="a listing's first page, newest first, and 1,600,000 older ids not sent; a 1.3 peer skips older_count")
msg("sync_ok_no_ids", "4.9-3 3.3-5", "SYNC_OK", 7,
    ("cursor", 0), ("ids", b""), ("has_more", 0), note="an empty ids value: 0 is a multiple of 16")
msg("ack", "4.10-1", "ACK", 8, ("token", FETCH_TOKEN), ("id", ID1))
msg("ack_ok", "4.10-1 4.10-2", "ACK_OK", 8, ("id", ID1))
msg("recall", "4.11-1", "RECALL", 9, ("id", ID2))
msg("recall_ok", "4.11-1 4.11-2", "RECALL_OK", 9, ("id", ID2))
msg("status", "4.12-1", "STATUS", 10, ("id", ID1))
msg("status_ok", "4.12-1", "STATUS_OK", 10,
    ("expires_at", EXPIRES_AT), ("id", ID1), ("state", 2), ("fetch_count", 1),
    ("fetched_at", CREATED_AT + 1500), ("created_at", CREATED_AT))
msg("status_ok_never_fetched", "4.12-1", "STATUS_OK", 11,
    ("expires_at", EXPIRES_AT), ("id", ID3), ("state", 1), ("fetch_count", 0),
    ("fetched_at", 0), ("created_at", CREATED_AT))
msg("send_minimal", "4.17-1 4.17-2 3.4-5", "SEND", 12,
    ("user", "alice"), ("payload", b"Your test results are ready: HbA1c 5.4%"),
    note="only the required fields: ttl_s 86400, read_limit 0, the push to the recipient "
         "(target_kind 2, target alice) for push_ttl_s = ttl_s")
msg("send_every_field", "4.17-1 4.17-2 4.17-3 4.17-5", "SEND", 13,
    ("user", "alice"), ("payload", b"Your test results are ready: HbA1c 5.4%"),
    ("ttl_s", 3600), ("read_limit", 1), ("target_kind", 3), ("target", "oncall"), ("alert", 1),
    ("priority", 10), ("collapse_key", "inbox"), ("push_ttl_s", 600),
    ("idempotency_key", "results/2023-11-14/alice"),
    note="every SEND field present: the push goes to alice's devices tagged oncall "
         "(see push_from_send in gateway.vec)")
msg("send_ok", "4.17-1 3.3-6", "SEND_OK", 13, ("expires_at", EXPIRES_AT), ("id", ID1),
    note="the payload and its push are committed; replayed absent: 0")
msg("send_ok_replayed", "4.17-5", "SEND_OK", 14,
    ("expires_at", EXPIRES_AT), ("id", ID1), ("replayed", 1),
    note="a retry of send_every_field with the same idempotency key: the first answer again, "
         "nothing stored")
msg("status_ok_push_waiting", "4.12-2 4.17-4", "STATUS_OK", 15,
    ("expires_at", EXPIRES_AT), ("id", ID1), ("state", 1), ("fetch_count", 0),
    ("fetched_at", 0), ("created_at", CREATED_AT), ("push_state", 1),
    note="stored by SEND, no gateway has answered its PUSH yet: written and queued absent")
msg("status_ok_push_handed", "4.12-2 4.13-4", "STATUS_OK", 16,
    ("expires_at", EXPIRES_AT), ("id", ID1), ("state", 2), ("fetch_count", 1),
    ("fetched_at", CREATED_AT + 1500), ("created_at", CREATED_AT), ("written", 2), ("queued", 1),
    ("push_state", 2), note="stored by SEND, its PUSH answered PUSH_ACK written 2, queued 1")

# --- gateway.vec ------------------------------------------------------------------------
section("gateway.vec", "PUSH in both directions, PUSH_ACK, DELIVERY_ACK, MISSED")

msg("push_to_user", "4.13-3 4.13-5 8-1", "PUSH", 20,
    ("id", ID1), ("ttl_s", 600), ("target_kind", 2), ("target", "alice"), ("alert", 1),
    ("priority", 10), ("collapse_key", "inbox"),
    note="provider to gateway, every PUSH field present")
msg("push_to_device", "4.13-1 4.13-3", "PUSH", 21,
    ("id", ID1), ("target_kind", 1), ("target", "phone-1"),
    note="provider to gateway, defaults for the rest")
msg("push_to_tag", "4.13-3", "PUSH", 22,
    ("id", ID2), ("target_kind", 3), ("target", "oncall"), ("priority", 0))
msg("push_provider_own_id", "4.13-1", "PUSH", 23,
    ("id", b"order-12345"), ("target_kind", 2), ("target", "alice"),
    note="PUSH ids are 1 to 64 bytes; only store messages insist on 16")
msg("push_device_form", "4.14-1", "PUSH", 1,
    ("id", ID1), ("alert", 1), ("priority", 7), ("collapse_key", "inbox"),
    note="gateway to device: no target, no ttl_s")
msg("push_device_form_minimal", "4.14-1 4.14-2 4.13-6", "PUSH", 2, ("id", ID2),
    note="no target: well-formed; a gateway would refuse it from a provider (4.13-2)")
msg("push_from_send", "4.13-11 4.13-12 4.17-3", "PUSH", 25,
    ("user", "alice"), ("id", ID1), ("ttl_s", 600), ("target_kind", 3), ("target", "oncall"),
    ("alert", 1), ("priority", 10), ("collapse_key", "inbox"), ("once", 1),
    note="the PUSH a store makes of send_every_field: only alice's devices tagged oncall, "
         "and a repeat of this id with once 1 is the same push")
msg("push_user_device", "4.13-11", "PUSH", 26,
    ("user", "alice"), ("id", ID2), ("target_kind", 1), ("target", "phone-1"),
    note="matches phone-1 only if its registration names alice")
msg("push_once_0", "4.13-12 3.4-5", "PUSH", 27,
    ("id", ID2), ("target_kind", 2), ("target", "alice"), ("once", 0),
    note="once 0 spelled out, as if absent: always delivered as a new push")
msg("push_ack", "4.13-4", "PUSH_ACK", 20, ("written", 2), ("queued", 1))
msg("push_ack_no_match", "4.13-4 4.13-7", "PUSH_ACK", 22, ("written", 0), ("queued", 0))
msg("push_ack_window_full", "4.13-10 4.14-5", "PUSH_ACK", 24, ("written", 0), ("queued", 1),
    note="one connected device whose delivery window is full: the push waits in its queue")
msg("delivery_ack", "4.14-2", "DELIVERY_ACK", 1, ("id", ID1))
msg("missed", "4.15-1 4.15-2 2-9 4.15-3", "MISSED", 0, ("missed_count", 3))


def registry_entries(*entries):
    """REGISTRY_OK's registrations: per entry its state, the credential's length (u16) and it."""
    return b"".join(bytes([state]) + len(c).to_bytes(2, "big") + c for state, c in entries)


msg("hello_gateway", "4.1-2 4.2-2 7.1-1 7.1-2", "HELLO", 1,
    ("role", 3), ("version_min", 1), ("version_max", 1), ("credential", GATEWAY_CREDENTIAL),
    ("name", "securepush-gateway"),
    note="a gateway opening a store connection with the gateway credential of credentials.txt")
msg("hello_provider_to_gateway", "4.2-2 7.1-4", "HELLO", 1,
    ("role", 2), ("version_min", 1), ("version_max", 1), ("credential", PROVIDER_CREDENTIAL_FOR_GATEWAY),
    note="a provider opening a gateway connection: its credential is made for audience 2")
msg("registry_from_start", "4.16-1 4.16-8 4.16-10", "REGISTRY", 2, ("wait_ms", 25000),
    note="from the first change (cursor 0), held up to 25 s when there is none")
msg("registry_after_cursor", "4.16-1 4.16-4", "REGISTRY", 3, ("cursor", 41), ("limit", 500))
msg("registry_limit_and_wait_over_max", "4.16-4 4.16-8", "REGISTRY", 4,
    ("cursor", 42), ("limit", 0xFFFFFFFF), ("wait_ms", 0xFFFFFFFF),
    note="well-formed: the store treats the limit as 1000 and waits at most 30000 ms")
msg("registry_ok_two", "4.16-2 4.16-3 4.16-5 4.16-6", "REGISTRY_OK", 2,
    ("cursor", 42), ("has_more", 0),
    ("registrations", registry_entries((2, EARLIER_REGISTRATION), (1, REGISTRATION))),
    note="phone-1 enrolled again: its earlier registration revoked (change 41), then the "
         "registration of credentials.txt enrolled (change 42)")
msg("registry_ok_more", "4.16-3 4.16-4", "REGISTRY_OK", 3,
    ("cursor", 41), ("has_more", 1), ("registrations", registry_entries((2, EARLIER_REGISTRATION))),
    note="the first page of the same changes with limit 1: more follow cursor 41")
msg("registry_ok_empty", "4.16-3 4.16-8", "REGISTRY_OK", 4, ("cursor", 42), ("has_more", 0),
    ("registrations", b""),
    note="nothing after the cursor, or a held request whose wait ended: the request's cursor comes back")
msg("goaway_revoked", "7.4-6 6-2 4.4-5", "GOAWAY", 0, ("message", "registration revoked"),
    ("last_correlation", 0), status="REVOKED")

# --- fields.vec -------------------------------------------------------------------------
section("fields.vec", "field handling that must be accepted")

msg("unknown_field_skipped", "3.4-2", "FETCH", 30,
    ("token", FETCH_TOKEN), ("id", ID1), (0x7E, b"future"),
    note="tag 0x7e is unknown: skipped")
msg("unknown_field_repeated_skipped", "3.4-2", "PING", 31,
    (0x50, b"\x01"), (0x50, b"\x02\x03"), note="an unknown tag twice is still just skipped")
msg("unknown_field_empty_skipped", "3.4-2 3.1-1", "RECALL", 32, ("id", ID2), (0xFF, b""))
msg("credential_tags_unknown_in_frames", "3.2-2 7.2-2", "FETCH", 33,
    ("id", ID1), (0x40, b"news"), (0x41, b"\x00"),
    note="0x40 and 0x41 mean something only inside credentials")
msg("known_field_not_in_table_skipped", "3.4-3", "FETCH", 34,
    ("user", "mallory"), ("id", ID1), note="user is known but not a FETCH field: skipped")
msg("known_field_not_in_table_unchecked", "3.4-3", "ACK", 35,
    ("user", b"\xff\xfe"), ("id", ID1), ("priority", b"\x00\x63"),
    note="invalid UTF-8 user and a two-byte priority: neither is an ACK field, so unchecked")
msg("known_field_not_in_table_repeated", "3.4-3", "RECALL", 36,
    ("name", "a"), ("name", "b"), ("id", ID2),
    note="a repeated field outside the table is skipped like an unknown one")
msg("fields_in_any_order", "3.4-1", "STORE", 37,
    ("read_limit", 2), ("ttl_s", 60), ("payload", b"hello"), ("user", "alice"),
    note="descending order: receivers accept any order")
msg("varint_padded_two_bytes", "3.1-4", "ERROR", 38, ("message", "gone", 2),
    status="GONE", note="length 4 written as 84 00")
msg("varint_padded_four_bytes", "3.1-3 3.1-4", "DELIVERY_ACK", 39, ("id", ID3, 4),
    note="length 16 written in the full four bytes 90 80 80 00")
msg("string_at_max_length", "3.3-3", "HELLO", 40,
    ("role", 1), ("version_min", 1), ("version_max", 1), ("name", "n" * 64))
msg("bytes_at_max_length", "3.3-3", "FETCH", 41, ("token", bytes(512)), ("id", ID1),
    note="a 512-byte token is as long as allowed (it would fail verification, not decoding)")
msg("utf8_multibyte", "3.3-2", "LOGIN", 42,
    ("user", "zoë"), ("password", b"\xff\x00secret"), ("device_id", "端末-1"),
    note="multi-byte UTF-8 strings; passwords are bytes, not text")
msg("empty_string", "3.3-2", "ERROR", 43, ("message", ""), status="INTERNAL")
msg("push_ttl_zero", "4.13-5", "PUSH", 44,
    ("id", ID1), ("ttl_s", 0), ("target_kind", 2), ("target", "alice"),
    note="ttl_s 0 in PUSH: connected devices only")
msg("send_skips_unknown_and_push_fields", "3.4-2 3.4-3", "SEND", 45,
    ("user", "alice"), ("payload", b"hi"), ("once", 2), (0x7E, b"future"),
    note="once is a PUSH field, not a SEND one: skipped unchecked (2 would be out of range), "
         "and the unknown tag 0x7e too; only PUSH refuses such fields (3.4-6)")
msg("idempotency_key_at_max_length", "3.3-3 4.17-5", "SEND", 46,
    ("user", "alice"), ("payload", b"hi"), ("idempotency_key", "k" * 128))
msg("identifier_exact_bytes", "3.3-9 3.3-2", "STORE", 47,
    ("user", "zoe\u0308"), ("payload", b"hi"),
    note="zoë in NFD: a well-formed name, not normalized; it names another user than zoë in NFC")
msg("string_with_newline", "3.3-8 3.3-2", "ERROR", 48, ("message", "line 1\nline 2"), status="INTERNAL",
    note="message is text, not an identifier: control characters are allowed in it")

# --- malformed.vec ----------------------------------------------------------------------
section("malformed.vec", "bodies that must be refused: a request gets ERROR and the connection "
        "stays open, a reply or one-way message gets no answer")

vector("varint_five_bytes", "3.1-3", frame("FETCH", 50, b"\x15" + bytes.fromhex("8080808001") +
                                           ID1), ("request_error", "BAD_REQUEST"),
       note="the fourth length byte has its continuation bit set")
vector("field_runs_past_body", "3.1-5", frame("FETCH", 51, b"\x15\x10" + ID1[:10]),
       ("request_error", "BAD_REQUEST"), note="id claims 16 bytes, the body holds 10")
vector("body_ends_inside_varint", "3.1-5", frame("SYNC", 52, b"\x19\x80"),
       ("request_error", "BAD_REQUEST"))
vector("body_ends_after_tag", "3.1-5", frame("SYNC", 53, b"\x19"),
       ("request_error", "BAD_REQUEST"))
bad("duplicate_field", "3.4-4", "FETCH", ("token", FETCH_TOKEN), ("id", ID1), ("id", ID2))
bad("duplicate_field_same_value", "3.4-4", "HELLO",
    ("role", 1), ("role", 1), ("version_min", 1), ("version_max", 1))
bad("missing_required_id", "3.4-5", "FETCH", ("token", FETCH_TOKEN))
bad("missing_required_version_max", "3.4-5", "HELLO", ("role", 1), ("version_min", 1))
bad("missing_required_last_correlation", "3.4-5 4.4-1", "GOAWAY", ("message", "bye"))
bad("missing_required_state", "3.4-5", "STATUS_OK",
    ("expires_at", EXPIRES_AT), ("id", ID1), ("fetch_count", 1), ("fetched_at", 0),
    ("created_at", CREATED_AT))
bad("missing_required_in_empty_body", "3.4-5", "MISSED")
bad("width_u32_as_2_bytes", "3.3-1", "STORE",
    ("user", "alice"), ("payload", b"x"), ("ttl_s", b"\x0e\x10"))
bad("width_u8_as_2_bytes", "3.3-1", "HELLO",
    ("role", b"\x00\x01"), ("version_min", 1), ("version_max", 1))
bad("width_u64_as_4_bytes", "3.3-1", "STORE_OK", ("expires_at", b"\x65\x53\xf1\x00"), ("id", ID1))
bad("width_u32_empty", "3.3-1", "PUSH_ACK", ("written", b""), ("queued", 0))
bad("invalid_utf8_byte_ff", "3.3-2", "LOGIN",
    ("user", b"al\xffce"), ("password", b"pw"), ("device_id", "phone-1"))
bad("invalid_utf8_overlong", "3.3-2", "PUSH",
    ("id", ID1), ("target_kind", 2), ("target", b"\xc0\xaf"))
bad("invalid_utf8_surrogate", "3.3-2", "ERROR", ("message", b"\xed\xa0\x80"))
bad("invalid_utf8_cut_sequence", "3.3-2", "LOGIN",
    ("user", "alice"), ("password", b"pw"), ("device_id", b"phone\xe2\x82"))
bad("identifier_nul_inside", "3.3-8 4.7-3", "STORE",
    ("user", b"alice\x00bob"), ("payload", b"hi"),
    note="never cut at the NUL, never UNKNOWN_USER: the body is malformed")
bad("identifier_nul_at_end", "3.3-8 4.17-1", "SEND",
    ("user", b"alice\x00"), ("payload", b"hi"))
bad("identifier_newline_in_tag_target", "3.3-8", "PUSH",
    ("id", ID1), ("target_kind", 3), ("target", "news\n"))
bad("identifier_del_in_collapse_key", "3.3-8", "SEND",
    ("user", "alice"), ("payload", b"hi"), ("collapse_key", "otp\x7f"))
bad("identifier_c1_in_device_id", "3.3-8", "LOGIN",
    ("user", "alice"), ("password", b"pw"), ("device_id", "phone\u0085"),
    note="U+0085 (NEL, c2 85) is a C1 control")
bad("identifier_tab_in_idempotency_key", "3.3-8 4.17-5", "SEND",
    ("user", "alice"), ("payload", b"hi"), ("idempotency_key", "key\t1"))
bad("string_over_max", "3.3-3", "HELLO",
    ("role", 1), ("version_min", 1), ("version_max", 1), ("name", "n" * 65))
bad("credential_over_max", "3.3-3", "HELLO",
    ("role", 1), ("version_min", 1), ("version_max", 1), ("credential", bytes(1025)))
bad("token_over_max", "3.3-3", "SYNC", ("token", bytes(513)))
bad("push_id_over_max", "3.3-3", "PUSH",
    ("id", bytes(65)), ("target_kind", 1), ("target", "phone-1"))
bad("push_with_payload", "3.4-6 8-1", "PUSH",
    ("id", ID1), ("payload", b"secret"), ("target_kind", 2), ("target", "alice"),
    note="a payload must never ride the push path")
bad("push_with_unknown_tag", "3.4-6", "PUSH",
    ("id", ID1), ("target_kind", 2), ("target", "alice"), (0x7E, b"x"),
    note="unknown tags are skipped everywhere except in PUSH")
bad("push_with_known_foreign_field", "3.4-6", "PUSH", ("id", ID1), ("device_id", "phone-1"),
    note="device_id is a known tag but not a PUSH field (user is one since revision 1.3)")
bad("push_with_credential_tag", "3.4-6 3.2-2", "PUSH", ("id", ID1), (0x40, b"news"))
bad("push_target_without_kind", "4.13-1", "PUSH", ("id", ID1), ("target", "alice"))
bad("push_kind_without_target", "4.13-1", "PUSH", ("id", ID1), ("target_kind", 2))
bad("push_empty_id", "4.13-1", "PUSH", ("id", b""), ("target_kind", 2), ("target", "alice"))
bad("push_missing_id", "3.4-5", "PUSH", ("target_kind", 2), ("target", "alice"))
bad("push_with_idempotency_key", "3.4-6 4.17-3", "PUSH",
    ("id", ID1), ("target_kind", 2), ("target", "alice"), ("idempotency_key", "k1"),
    note="SEND's fields are not PUSH's: the store forwards only the push fields")
bad("send_missing_user", "3.4-5 4.17-1", "SEND", ("payload", b"hi"))
bad("send_missing_payload", "3.4-5 4.17-1", "SEND", ("user", "alice"), ("target_kind", 2),
    ("target", "alice"))
bad("send_kind_without_target", "4.13-1 4.17-2", "SEND",
    ("user", "alice"), ("payload", b"hi"), ("target_kind", 1))
bad("send_target_without_kind", "4.13-1 4.17-2", "SEND",
    ("user", "alice"), ("payload", b"hi"), ("target", "phone-1"))
bad("idempotency_key_over_max", "3.3-3 4.17-5", "SEND",
    ("user", "alice"), ("payload", b"hi"), ("idempotency_key", "k" * 129),
    note="129 bytes, one over the maximum of 128")
bad("sync_ok_ids_not_multiple_of_16", "3.3-5", "SYNC_OK",
    ("cursor", 1), ("ids", ID1 + ID2[:4]), ("has_more", 0))
bad("fetch_id_15_bytes", "3.3-6", "FETCH", ("token", FETCH_TOKEN), ("id", ID1[:15]))
bad("ack_id_17_bytes", "3.3-6", "ACK", ("token", FETCH_TOKEN), ("id", ID1 + b"\x00"))
bad("store_ok_id_8_bytes", "3.3-6", "STORE_OK", ("expires_at", EXPIRES_AT), ("id", ID1[:8]))
bad("status_id_empty", "3.3-6", "STATUS", ("id", b""))
bad("recall_ok_id_32_bytes", "3.3-6", "RECALL_OK", ("id", ID1 + ID2))
bad("send_ok_id_15_bytes", "3.3-6 4.17-1", "SEND_OK", ("expires_at", EXPIRES_AT), ("id", ID1[:15]))
bad("role_0", "3.3-4", "HELLO", ("role", 0), ("version_min", 1), ("version_max", 1))
bad("role_4", "3.3-4", "HELLO", ("role", 4), ("version_min", 1), ("version_max", 1))
bad("target_kind_0", "3.3-4", "PUSH", ("id", ID1), ("target_kind", 0), ("target", "alice"))
bad("target_kind_4", "3.3-4", "PUSH", ("id", ID1), ("target_kind", 4), ("target", "alice"))
bad("priority_11", "3.3-4", "PUSH",
    ("id", ID1), ("target_kind", 2), ("target", "alice"), ("priority", 11))
bad("alert_2", "3.3-4", "PUSH", ("id", ID1), ("alert", 2))
bad("has_more_2", "3.3-4", "SYNC_OK", ("cursor", 1), ("ids", ID1), ("has_more", 2))
bad("state_0", "3.3-4", "STATUS_OK",
    ("expires_at", EXPIRES_AT), ("id", ID1), ("state", 0), ("fetch_count", 0),
    ("fetched_at", 0), ("created_at", CREATED_AT))
bad("state_4", "3.3-4", "STATUS_OK",
    ("expires_at", EXPIRES_AT), ("id", ID1), ("state", 4), ("fetch_count", 0),
    ("fetched_at", 0), ("created_at", CREATED_AT))
bad("once_2", "3.3-4 4.13-12", "PUSH",
    ("id", ID1), ("target_kind", 2), ("target", "alice"), ("once", 2))
bad("push_state_3", "3.3-4 4.12-2", "STATUS_OK",
    ("expires_at", EXPIRES_AT), ("id", ID1), ("state", 1), ("fetch_count", 0),
    ("fetched_at", 0), ("created_at", CREATED_AT), ("push_state", 3))
bad("replayed_2", "3.3-4 4.17-5", "SEND_OK", ("expires_at", EXPIRES_AT), ("id", ID1), ("replayed", 2))
bad("registry_ok_entry_state_0", "3.3-7 4.16-2", "REGISTRY_OK",
    ("cursor", 42), ("has_more", 0), ("registrations", b"\x00" + registry_entries((1, REGISTRATION))[1:]))
bad("registry_ok_entry_state_3", "3.3-7 4.16-2", "REGISTRY_OK",
    ("cursor", 42), ("has_more", 0), ("registrations", registry_entries((1, REGISTRATION), (3, REGISTRATION))),
    note="a valid entry, then one in state 3: the whole reply is refused")
bad("registry_ok_entry_length_0", "3.3-7 4.16-2", "REGISTRY_OK",
    ("cursor", 42), ("has_more", 0), ("registrations", b"\x02\x00\x00"))
bad("registry_ok_entry_cut_off", "3.3-7 4.16-2", "REGISTRY_OK",
    ("cursor", 42), ("has_more", 0), ("registrations", registry_entries((1, REGISTRATION))[:-1]),
    note="the entry announces 82 credential bytes, the value holds 81")
bad("registry_ok_entry_header_cut_off", "3.3-7 4.16-2", "REGISTRY_OK",
    ("cursor", 42), ("has_more", 0), ("registrations", registry_entries((1, REGISTRATION)) + b"\x01\x00"),
    note="two stray bytes after a whole entry: too few for a state and a length")
bad("registry_ok_entry_over_1024", "3.3-7", "REGISTRY_OK",
    ("cursor", 42), ("has_more", 0), ("registrations", b"\x01\x04\x01" + bytes(1025)))
bad("registry_ok_missing_registrations", "3.4-5", "REGISTRY_OK", ("cursor", 42), ("has_more", 0))
bad("registry_ok_has_more_2", "3.3-4", "REGISTRY_OK",
    ("cursor", 42), ("has_more", 2), ("registrations", b""))
bad("registry_wait_ms_as_2_bytes", "3.3-1", "REGISTRY", ("wait_ms", b"\x61\xa8"))
bad("store_payload_and_sealed", "4.7-5", "STORE",
    ("user", "alice"), ("payload", b"hi"), ("sealed_payload", SEALED_EXAMPLE),
    note="two content fields: a 1.4 receiver would keep payload and skip the other")
bad("send_without_content", "4.7-5 3.4-5", "SEND", ("user", "alice"), ("target_kind", 2), ("target", "alice"))
bad("send_sealed_and_to_seal", "4.7-5", "SEND",
    ("user", "alice"), ("sealed_payload", SEALED_EXAMPLE), ("payload_to_seal", b"hi"))
bad("fetch_ok_payload_and_sealed", "4.8-4", "FETCH_OK",
    ("expires_at", EXPIRES_AT), ("id", ID1), ("payload", b"hi"), ("created_at", CREATED_AT),
    ("sealed_payload", SEALED_EXAMPLE))
bad("login_key_suite_without_key", "4.6-6", "LOGIN",
    ("user", "alice"), ("password", b"pw"), ("device_id", "phone-1"), ("key_suite", 1))
bad("login_key_without_suite", "4.6-6", "LOGIN",
    ("user", "alice"), ("password", b"pw"), ("device_id", "phone-1"), ("device_key", X25519_KEY))
bad("login_key_suite_3", "3.3-4 4.6-6", "LOGIN",
    ("user", "alice"), ("password", b"pw"), ("device_id", "phone-1"), ("key_suite", 3), ("device_key", X25519_KEY))
bad("login_x25519_key_31_bytes", "4.6-6", "LOGIN",
    ("user", "alice"), ("password", b"pw"), ("device_id", "phone-1"), ("key_suite", 1), ("device_key", X25519_KEY[:31]))
bad("login_ok_key_id_7_bytes", "3.3-6 4.6-8", "LOGIN_OK",
    ("token", FETCH_TOKEN), ("expires_at", TOKEN_EXPIRES_AT), ("key_id", KEY_ID_PHONE[:7]))
bad("keys_ok_entry_cut_off", "4.18-2", "KEYS_OK",
    ("cursor", 42), ("keys", key_entries((b"phone-1", 1, KEY_ID_PHONE, X25519_KEY))[:-1]),
    note="the entry announces a 32-byte key, the value holds 31")
bad("keys_ok_suite_3", "4.18-2", "KEYS_OK",
    ("cursor", 42), ("keys", key_entries((b"phone-1", 3, KEY_ID_PHONE, X25519_KEY))))
bad("keys_ok_key_length_not_suite", "4.18-2", "KEYS_OK",
    ("cursor", 42), ("keys", key_entries((b"phone-1", 2, KEY_ID_PHONE, X25519_KEY))),
    note="an X-Wing entry with a 32-byte key")

# ---------------------------------------------------------------------------------------
# Output


def hex_lines(data, first_is_header=True):
    lines = []
    rest = data
    if first_is_header and len(data) >= 16:
        lines.append(data[:16])
        rest = data[16:]
    for i in range(0, len(rest), 16):
        lines.append(rest[i:i + 16])
    return ["hex " + " ".join("%02x" % b for b in chunk) for chunk in lines]


def render(title, vectors):
    out = [
        "# securepush protocol v1 golden vectors: " + title,
        "# Generated by protocol/tools/gen_vectors.py; do not edit. Format: SPEC.md section 9.",
        "",
    ]
    for v in vectors:
        max_frame = v["max_frame"] or DEFAULT_MAX_FRAME
        got = decode(v["data"], max_frame)
        expect = v["expect"]
        if expect[0] == "message":
            want = ("message", expect[1], expect[2], expect[3],
                    [(field_name(t), val) for t, val in v["fields"]])
        else:
            want = expect
        if got != want:
            raise SystemExit("vector %s: expected %r, reference decoder says %r"
                             % (v["name"], want, got))
        if v["note"]:
            out.append("# " + v["note"])
        out.append("vector " + v["name"])
        for clause in v["clauses"]:
            out.append("clause " + clause)
        if v["max_frame"] is not None:
            out.append("max_frame %d" % v["max_frame"])
        out.extend(hex_lines(v["data"]))
        if expect[0] == "message":
            out.append("expect message %s correlation=%d status=%s" % expect[1:])
            for tag, val in v["fields"]:
                out.append("field %s %s" % (field_name(tag), val.hex() if val else "-"))
        else:
            out.append("expect %s %s" % expect if len(expect) == 2 else "expect " + expect[0])
        out.append("end")
        out.append("")
    return "\n".join(out)


def outputs():
    names = [v["name"] for _, vs in FILES.values() for v in vs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SystemExit("duplicate vector names: " + ", ".join(dupes))
    files = {name: render(title, vs) for name, (title, vs) in FILES.items()}
    files["credentials.txt"] = credentials_text()
    return files, len(names)


def main(argv):
    check = "--check" in argv
    files, count = outputs()
    stale = []
    for name, text in sorted(files.items()):
        path = os.path.join(VECTOR_DIR, name)
        data = text.encode("utf-8")
        current = open(path, "rb").read() if os.path.exists(path) else None
        if current == data:
            continue
        if check:
            stale.append(name)
        else:
            os.makedirs(VECTOR_DIR, exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    if stale:
        print("out of date: " + ", ".join(stale) + " (run protocol/tools/gen_vectors.py)")
        return 1
    print("%d vectors in %d files%s" % (count, len(files) - 1, " (up to date)" if check else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
