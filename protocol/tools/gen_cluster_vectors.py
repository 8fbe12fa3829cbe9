#!/usr/bin/env python3
"""Writes protocol/vectors/cluster.txt, the golden encodings of the messages gateway nodes
exchange over NATS and keep in JetStream (protocol/CLUSTER.md), and
protocol/vectors/cluster-seal.txt, the same messages sealed (CLUSTER.md, "Authentication").

An encoder of the layout written from CLUSTER.md alone, independent of the Swift code,
whose tests decode every vector and re-encode those marked `expect encoding`. The two
untagged queue records are bytes written by the version-1 Swift encoder (the build before
the tagged layout) and are kept as they were. Standard library only; deterministic.

    python3 protocol/tools/gen_cluster_vectors.py            # write the file
    python3 protocol/tools/gen_cluster_vectors.py --check    # fail if it is out of date
"""

import hashlib
import hmac
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_vectors import varint  # noqa: E402  (field lengths are the protocol's, SPEC.md 3.1)

PATH = os.path.join(os.path.dirname(HERE), "vectors", "cluster.txt")
SEAL_PATH = os.path.join(os.path.dirname(HERE), "vectors", "cluster-seal.txt")

VERSION = 2

# CLUSTER.md, tag table.
NODE, BOOT, DEVICES, WANTS_PRESENCE, CHANGE, DEVICE_ID, ONLINE, STAMP, USER, DEVICE_TAG = range(0x01, 0x0B)
BATCH_ID, FORWARDED, COUNTS, WRITTEN, QUEUED = range(0x0B, 0x10)
FRAME_BODY, PRIORITY, COLLAPSE_KEY, EXPIRES_AT_MS, ENROLMENT, MISSED, ENTRY, RETURNED, RANK = range(0x10, 0x19)
PUSH_USER, ONCE = range(0x19, 0x1B)
LOOPS = 0x1B

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


def field(tag, value, width=None):
    return bytes([tag]) + varint(len(value), width) + value


def integer(tag, n):
    """Big-endian in the fewest bytes: none for 0."""
    return field(tag, n.to_bytes((n.bit_length() + 7) // 8, "big"))


def string(tag, s):
    return field(tag, s.encode("utf-8"))


def message(body, version=VERSION):
    return bytes([version]) + struct.pack(">I", len(body)) + body


# Messages, each field in the order CLUSTER.md gives.

def push_fields(body, priority, collapse, expires, user=None, once=False):
    out = field(FRAME_BODY, body) + integer(PRIORITY, priority)
    if collapse is not None:
        out += string(COLLAPSE_KEY, collapse)
    out += integer(EXPIRES_AT_MS, expires)
    # Absent unless set, so a push without them has the bytes of the build before them.
    if user is not None:
        out += string(PUSH_USER, user)
    if once:
        out += integer(ONCE, 1)
    return out


def heartbeat(node, boot, devices, wants, loops=0):
    body = (string(NODE, node) + integer(BOOT, boot) + integer(DEVICES, devices)
            + integer(WANTS_PRESENCE, 1 if wants else 0))
    # Absent when 0, so the heartbeat of a build before node heartbeats has its bytes.
    if loops:
        body += integer(LOOPS, loops)
    return message(body)


def presence(node, boot, changes):
    body = string(NODE, node) + integer(BOOT, boot)
    for device, online, stamp, user, tags in changes:
        change = (string(DEVICE_ID, device) + integer(ONLINE, 1 if online else 0) + integer(STAMP, stamp)
                  + string(USER, user) + b"".join(string(DEVICE_TAG, t) for t in tags))
        body += field(CHANGE, change)
    return message(body)


def forward_batch(batch, pushes):
    body = integer(BATCH_ID, batch)
    for push, devices in pushes:
        body += field(FORWARDED, b"".join(string(DEVICE_ID, d) for d in devices) + push_fields(*push))
    return message(body)


def forward_replies(batch, counts):
    body = integer(BATCH_ID, batch)
    for written, queued in counts:
        body += field(COUNTS, integer(WRITTEN, written) + integer(QUEUED, queued))
    return message(body)


def take_notice(devices):
    return message(b"".join(string(DEVICE_ID, d) for d in devices))


def queue_record(user, enrolment, missed, entries):
    body = string(USER, user) + integer(ENROLMENT, enrolment) + integer(MISSED, missed)
    for push, returned, rank in entries:
        body += field(ENTRY, push_fields(*push) + integer(RETURNED, 1 if returned else 0) + integer(RANK, rank))
    return message(body)


# The pushes of the vectors: bodies of device PUSH frames (SPEC.md 4.13) with ids 1 and 2.
WALL = 1_700_000_000_000
PUSH_1 = (bytes.fromhex("150101330109340573636f7265"), 9, "score", WALL + 60_000)
PUSH_2 = (bytes.fromhex("150102"), 5, None, WALL + 3_600_000)
# A body over 127 bytes, so the entry holding it has a two-byte length.
PUSH_LONG = (bytes([0x15, 0x81, 0x01]) + bytes(range(129)), 0, "", 0)
# PUSH_2 as a provider sent it with user alice and once 1 (SPEC.md 4.13-11, 4.13-12), and
# as a queue record keeps it: with once, without the user.
PUSH_2_ONCE_USER = PUSH_2 + ("alice", True)
PUSH_2_ONCE = PUSH_2 + (None, True)

# Written by the untagged version-1 encoder (QueueRecord.encoded() before the tagged
# layout) for the records of `queue_record` and `queue_record_untagged_missed_only`.
UNTAGGED_RECORD = bytes.fromhex(
    "0105616c696365c0cbd8febc3103020d150101330109340573636f726509010573636f7265e0a499ffbc3101"
    "0203150102050080adf180bd310007")
UNTAGGED_MISSED_ONLY = bytes.fromhex("0103626f62000100")

RECORD = ("alice", 1_699_999_000_000, 3, [(PUSH_1, True, 2), (PUSH_2, False, 7)])

VECTORS = [
    # (name, message type, bytes, expectation, note)
    ("heartbeat", "NodeHeartbeat", heartbeat("g1", 42, 7, True), "encoding",
     "node g1, boot 42, 7 devices, wants everyone's presence"),
    ("heartbeat_zero_integers", "NodeHeartbeat", heartbeat("g-2", 0, 0, False), "encoding",
     "integers of value 0 have empty values"),
    ("heartbeat_widest_boot", "NodeHeartbeat", heartbeat("g3", U64_MAX, 1, False), "encoding",
     "the largest boot takes 8 bytes"),
    ("heartbeat_node_of_loops", "NodeHeartbeat", heartbeat("g1", 42, 7, True, loops=4), "encoding",
     "the heartbeat of `heartbeat` from a node of 4 loops: it speaks for g1, g1~1, g1~2 and g1~3"),
    ("presence", "PresenceBatch",
     presence("g2", 5, [("phone", True, 9, "alice", ["news", "sport"]), ("tablet", False, 3, "bob", [])]),
     "encoding", "two changes, the first with two device tags"),
    ("forward_batch", "ForwardBatch",
     forward_batch(77, [(PUSH_1, ["a", "b", "\u00fc"]), (PUSH_2, ["c"])]), "encoding",
     "two pushes, for three devices and for one"),
    ("forward_replies", "ForwardReplies", forward_replies(U64_MAX, [(3, U32_MAX), (0, 1)]), "encoding",
     "the counts of two pushes"),
    ("take_notice", "TakeNotice", take_notice(["phone", "tablet"]), "encoding", "two devices"),
    ("forward_batch_user_once", "ForwardBatch",
     forward_batch(78, [(PUSH_2_ONCE_USER, ["a"]), (PUSH_1, ["b"])]), "encoding",
     "a push with push_user alice and once, then one without either: its fields as in forward_batch"),
    ("queue_record_once", "QueueRecord",
     queue_record("alice", 0, 0, [(PUSH_2_ONCE, False, 1), (PUSH_1, False, 2)]), "encoding",
     "an entry with once (and no push_user, which records do not keep), then one without"),
    ("queue_record", "QueueRecord", queue_record(*RECORD), "encoding",
     "a returned entry with a collapse key, then one without"),
    ("queue_record_long_entry", "QueueRecord", queue_record("carol", 0, 0, [(PUSH_LONG, False, 1)]),
     "encoding", "an entry over 127 bytes: its length takes two bytes; an empty collapse key is not none"),
    ("queue_record_untagged", "QueueRecord", UNTAGGED_RECORD, "decodes",
     "the record of queue_record in the untagged layout of version 1, as JetStream may still hold it"),
    ("queue_record_untagged_missed_only", "QueueRecord", UNTAGGED_MISSED_ONLY, "decodes",
     "a version-1 record of user bob with one missed push and no entries"),
    ("heartbeat_unknown_fields", "NodeHeartbeat",
     message(field(0x7F, b"future") + integer(DEVICES, 7) + integer(0xE0, 5) + string(NODE, "g1")
             + integer(WANTS_PRESENCE, 1) + integer(BOOT, 42)),
     "decodes", "unknown tags 0x7f and 0xe0 are skipped; fields in another order: the heartbeat of `heartbeat`"),
    ("presence_unknown_nested_field", "PresenceBatch",
     message(string(NODE, "g2") + integer(BOOT, 5)
             + field(CHANGE, string(DEVICE_ID, "phone") + integer(ONLINE, 1) + field(0x60, b"\x01\x02")
                     + integer(STAMP, 9) + string(USER, "alice"))),
     "decodes", "an unknown tag inside a change is skipped"),
    ("forward_batch_unknown_push_field", "ForwardBatch",
     message(integer(BATCH_ID, 78) + field(FORWARDED, string(DEVICE_ID, "a") + push_fields(*PUSH_2_ONCE_USER)
                                            + field(0x1B, b"later"))),
     "decodes", "a push field of a later build (tag 0x1b) is skipped: the first push of forward_batch_user_once"),
    ("queue_record_missing_fields", "QueueRecord",
     message(string(USER, "dave") + field(ENTRY, field(FRAME_BODY, PUSH_2[0]))),
     "decodes", "missing fields take their defaults: enrolment 0, missed 0, priority 0, no collapse key, "
                "expiry 0, no push user, not once, not returned, rank 0"),
    ("heartbeat_padded_lengths", "NodeHeartbeat",
     message(field(NODE, b"g1", 2) + field(BOOT, b"\x2a", 4) + integer(DEVICES, 7) + integer(WANTS_PRESENCE, 1)),
     "decodes", "field lengths padded to 2 and 4 bytes are read, as in protocol bodies: the heartbeat of `heartbeat`"),
    ("take_notice_empty", "TakeNotice", message(b""), "encoding", "no devices: an empty body"),
    ("heartbeat_next_major_version", "NodeHeartbeat", message(string(NODE, "g1"), version=3),
     "refused unknown_version", "a layout this build must not read"),
    ("heartbeat_body_cut_short", "NodeHeartbeat", heartbeat("g1", 42, 7, True)[:-1], "refused truncated",
     "the header counts one byte more than follows"),
    ("heartbeat_trailing_byte", "NodeHeartbeat", heartbeat("g1", 42, 7, True) + b"\x00", "refused truncated",
     "a byte after the body the header counts"),
    ("heartbeat_without_node", "NodeHeartbeat", message(integer(BOOT, 42)), "refused missing_field 0x01",
     "the node is required"),
    ("forward_batch_without_frame_body", "ForwardBatch",
     message(integer(BATCH_ID, 1) + field(FORWARDED, string(DEVICE_ID, "a") + integer(PRIORITY, 5))),
     "refused missing_field 0x10", "a push is nothing without its frame body"),
    ("forward_replies_count_over_u32", "ForwardReplies",
     message(integer(BATCH_ID, 1) + field(COUNTS, integer(WRITTEN, 2**32))), "refused out_of_range",
     "written is a u32"),
    ("heartbeat_integer_of_nine_bytes", "NodeHeartbeat",
     message(string(NODE, "g1") + field(BOOT, b"\x00" * 9)), "refused out_of_range",
     "an integer has at most 8 bytes"),
    ("heartbeat_length_of_five_bytes", "NodeHeartbeat",
     message(string(NODE, "g1") + bytes([BOOT, 0x81, 0x80, 0x80, 0x80, 0x00])), "refused out_of_range",
     "a field length has at most 4 bytes"),
    ("take_notice_field_past_end", "TakeNotice",
     message(bytes([DEVICE_ID]) + varint(2**28 - 1) + b"phone"), "refused truncated",
     "a length far beyond the bytes present is refused, not allocated"),
    ("presence_change_past_its_message", "PresenceBatch",
     message(string(NODE, "g2") + bytes([CHANGE, 0x03]) + string(DEVICE_ID, "phone")), "refused truncated",
     "a field inside a change runs past the change's length"),
]


def render():
    out = [
        "# securepush cluster messages, layout version 2: golden encodings (protocol/CLUSTER.md).",
        "# Generated by protocol/tools/gen_cluster_vectors.py; do not edit.",
        "#",
        "# vector NAME / message TYPE / hex lines / expect OUTCOME / end, where OUTCOME is",
        "#   encoding          decodes to the value the test names NAME, which encodes to these bytes",
        "#   decodes           decodes to that value (written otherwise by this build)",
        "#   refused ERROR     refused as a whole: truncated, unknown_version, out_of_range or",
        "#                     missing_field TAG",
        "",
    ]
    names = [v[0] for v in VECTORS]
    if len(set(names)) != len(names):
        raise SystemExit("duplicate vector names")
    for name, kind, data, expect, note in VECTORS:
        out.append("# " + note)
        out.append("vector " + name)
        out.append("message " + kind)
        for i in range(0, len(data), 16):
            out.append("hex " + " ".join("%02x" % b for b in data[i:i + 16]))
        out.append("expect " + expect)
        out.append("end")
        out.append("")
    return "\n".join(out)


# CLUSTER.md, "Authentication".
SEAL_VERSION = 3
SERVER_KEY = bytes(range(0x20, 0x40))


def cluster_key(server_key):
    """HKDF-SHA256 (RFC 5869), no salt, info "securepush cluster messages v1", 32 bytes."""
    prk = hmac.new(b"\x00" * 32, server_key, hashlib.sha256).digest()
    return hmac.new(prk, b"securepush cluster messages v1" + b"\x01", hashlib.sha256).digest()


def seal(inner, subject, sender, sent_at_ms, nonce, key=None):
    name = sender.encode("utf-8")
    sealed = bytes([SEAL_VERSION, len(name)]) + name + struct.pack(">QQ", sent_at_ms, nonce) + inner
    subject = subject.encode("utf-8")
    tag = hmac.new(key or cluster_key(SERVER_KEY), struct.pack(">H", len(subject)) + subject + sealed, hashlib.sha256).digest()
    return sealed + tag


HEARTBEAT = heartbeat("g1", 42, 7, True)
FORWARD = VECTORS[[v[0] for v in VECTORS].index("forward_batch")][2]
RECORD = VECTORS[[v[0] for v in VECTORS].index("queue_record")][2]

# (name, subject it is published on, subject it is opened on, sender, sent_at_ms, nonce, inner, sealed, expect, note)
SEAL_VECTORS = [
    ("heartbeat", "securepush.nodes", "securepush.nodes", "g1", 1_800_000_000_000, 7, HEARTBEAT, None, "opens",
     "the heartbeat of cluster.txt's `heartbeat`, sealed by g1"),
    ("forward", "securepush.node.g2.push", "securepush.node.g2.push", "g1", 1_800_000_000_001, 8, FORWARD, None, "opens",
     "the forward batch of cluster.txt's `forward_batch`, from g1 to g2"),
    ("queue_record", "securepush.queue.phone", "securepush.queue.phone", "g2~1", 1_800_000_000_002, 41, RECORD, None, "opens",
     "a queue record written by member g2~1 over the record of sequence 41"),
    ("queue_record_emptied", "securepush.queue.phone", "securepush.queue.phone", "g1", 1_800_000_000_003, 42, b"", None, "opens",
     "an emptied queue: a seal around no bytes"),
    ("forward_moved", "securepush.node.g2.push", "securepush.node.g3.push", "g1", 1_800_000_000_001, 8, FORWARD, None,
     "refused bad_tag", "the forward of `forward` published on g3's subject"),
    ("queue_record_moved", "securepush.queue.phone", "securepush.queue.tablet", "g2~1", 1_800_000_000_002, 41, RECORD, None,
     "refused bad_tag", "the record of `queue_record` copied to another device's queue"),
    ("other_deployment", "securepush.nodes", "securepush.nodes", "g1", 1_800_000_000_000, 7, HEARTBEAT,
     seal(HEARTBEAT, "securepush.nodes", "g1", 1_800_000_000_000, 7, key=cluster_key(bytes(32))), "refused bad_tag",
     "the heartbeat sealed under another deployment's server key (32 zero bytes)"),
    ("unsealed", "securepush.nodes", "securepush.nodes", "g1", 0, 0, HEARTBEAT, HEARTBEAT, "refused unsealed",
     "a version 2 message as the build before authentication sent it"),
]


def render_seals():
    out = [
        "# securepush cluster messages and queue records, sealed (protocol/CLUSTER.md, \"Authentication\").",
        "# Generated by protocol/tools/gen_cluster_vectors.py; do not edit.",
        "#",
        "# server_key is the deployment's server key the cluster key is derived from. Each vector:",
        "# vector NAME / subject S (opened on) / sender / sent_at_ms / nonce / inner hex (the message",
        "# sealed) / hex lines (the bytes on NATS or in JetStream) / expect opens | refused REASON / end",
        "",
        "server_key " + SERVER_KEY.hex(),
        "cluster_key " + cluster_key(SERVER_KEY).hex(),
        "",
    ]
    for name, published, opened, sender, sent_at, nonce, inner, sealed, expect, note in SEAL_VECTORS:
        data = sealed if sealed is not None else seal(inner, published, sender, sent_at, nonce)
        out += ["# " + note, "vector " + name, "subject " + opened, "sender " + sender, "sent_at_ms %d" % sent_at,
                "nonce %d" % nonce, "inner " + (inner.hex() or "-")]
        for i in range(0, len(data), 16):
            out.append("hex " + " ".join("%02x" % b for b in data[i:i + 16]))
        out += ["expect " + expect, "end", ""]
    return "\n".join(out)


def main(argv):
    files = [(PATH, render().encode("utf-8"), len(VECTORS)), (SEAL_PATH, render_seals().encode("utf-8"), len(SEAL_VECTORS))]
    stale = False
    for path, text, count in files:
        current = open(path, "rb").read() if os.path.exists(path) else None
        if "--check" in argv:
            if current != text:
                print("out of date: %s (run protocol/tools/gen_cluster_vectors.py)" % os.path.basename(path))
                stale = True
            else:
                print("%d vectors in %s (up to date)" % (count, os.path.basename(path)))
            continue
        if current != text:
            with open(path, "wb") as f:
                f.write(text)
        print("%d vectors in %s" % (count, os.path.basename(path)))
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
