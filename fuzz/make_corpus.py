#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora from the golden vectors (protocol/vectors/*.vec).

    python3 fuzz/make_corpus.py OUT_DIR

OUT_DIR/wire-decoder/ gets, per vector, its bytes behind the 5-byte prefix that
fuzz/WireDecoder.swift reads (the vector's max_frame, a split seed); OUT_DIR/
session-read-path/ gets each vector both as a connection's first frame and after the
valid HELLO the target prepends on request (fuzz/SessionReadPath.swift), under each
service's requests. Both also get each file's whole frames as one stream.
OUT_DIR/http-request-path/ gets the README's HTTP API examples (its curl command and its
Python request, as those clients send them) and the other routes (a sealed payload and a
text to seal on arrival, a recipient's keys with and without If-None-Match), alone and
one after another on a keep-alive connection (fuzz/HTTPRequestPath.swift).
"""

import ast
import base64
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(os.path.dirname(HERE), "protocol", "vectors")
# The order of `maxFrames` in WireDecoder.swift.
MAX_FRAMES = [1024, 4096, 65536, 1 << 20]


def read_vectors(path):
    """[(name, max_frame, bytes, whole)] from one .vec file; `whole` for a vector that
    is one delimited frame, which can be followed by others in a stream."""
    vectors, current = [], None
    for line in open(path, encoding="utf-8"):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] == "vector":
            current = {"name": words[1], "max_frame": 65536, "hex": "", "whole": False}
        elif words[0] == "max_frame":
            current["max_frame"] = int(words[1])
        elif words[0] == "expect":
            current["whole"] = words[1] in ("message", "request_error", "rejected")
        elif words[0] == "hex":
            current["hex"] += "".join(words[1:])
        elif words[0] == "end":
            vectors.append((current["name"], current["max_frame"], bytes.fromhex(current["hex"]),
                            current["whole"]))
            current = None
    return vectors


def frame_index(max_frame):
    return min(range(len(MAX_FRAMES)), key=lambda i: abs(MAX_FRAMES[i] - max_frame))


def write(directory, name, data):
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


README = os.path.join(os.path.dirname(HERE), "README.md")


def http_request(method, path, headers, body=b""):
    head = "%s %s HTTP/1.1\r\n" % (method, path)
    for name, value in headers + ([("Content-Length", str(len(body)))] if body or method == "POST" else []):
        head += "%s: %s\r\n" % (name, value)
    return (head + "\r\n").encode() + body


def readme_http_seeds():
    """{name: bytes}: the README's curl and Python examples as curl and urllib send them,
    sealed posts, GET and DELETE of an id and GET of a recipient's keys, each alone and
    all on one connection."""
    text = open(README, encoding="utf-8").read()
    token = ("Authorization", "Bearer sp_0123456789abcdef_0123456789abcdef0123456789abcdef")
    seeds = {}
    curl = re.search(r"curl -sS (\S+)(.*?)-d '([^']*)'", text, re.S)
    if curl:
        path = "/" + curl.group(1).split("/", 3)[3]
        headers = [("Host", "127.0.0.1:8080"), ("User-Agent", "curl/8.5.0"), ("Accept", "*/*"), token]
        headers += [tuple(h.split(": ", 1)) for h in re.findall(r'-H "([^"$]*)"', curl.group(2))]
        seeds["readme_curl"] = http_request("POST", path, headers, curl.group(3).encode())
    python = re.search(r"data=json\.dumps\((\{.*?\})\)\.encode\(\)", text, re.S)
    key = re.search(r'"Idempotency-Key": "([^"]*)"', text)
    if python:
        body = json.dumps(ast.literal_eval(python.group(1))).encode()
        headers = [("Accept-Encoding", "identity"), ("Content-Type", "application/json"), ("Host", "127.0.0.1:8080"),
                   ("User-Agent", "Python-urllib/3.11"), token, ("Idempotency-Key", key.group(1) if key else "order-1236"),
                   ("Connection", "close")]
        seeds["readme_python"] = http_request("POST", "/v1/messages", headers, body)
    every = {"recipient": "alice", "text": "Your code is 2213", "ttl_s": 3600, "read_limit": 1,
             "push": {"device": "phone-1", "alert": True, "priority": 10, "collapse_key": "otp", "ttl_s": 600}}
    json_headers = [("Host", "127.0.0.1:8080"), token, ("Content-Type", "application/json")]
    seeds["every_member"] = http_request("POST", "/v1/messages", json_headers, json.dumps(every).encode())
    seeds["base64_tag"] = http_request("POST", "/v1/messages", json_headers,
                                       b'{"recipient":"alice","payload":"AAEC/w==","push":{"tag":"work"}}')
    # A sealed payload (SPEC.md 7.6) of one x25519 stanza, as a provider posts it, and a
    # text for the store to seal on arrival.
    sealed = bytes([1]) + bytes(range(16)) + bytes([1, 1]) + bytes(8) + bytes(32) + bytes(48) + bytes(24)
    seeds["sealed"] = http_request("POST", "/v1/messages", json_headers + [("Idempotency-Key", "order-1240")],
                                   json.dumps({"recipient": "alice", "sealed": base64.b64encode(sealed).decode(),
                                               "push": {"alert": True}}).encode())
    seeds["seal_on_arrival"] = http_request("POST", "/v1/messages", json_headers,
                                            b'{"recipient":"alice","text":"your code is 1241","seal":"devices"}')
    keys = "/v1/recipients/zo%C3%AB%2Fwork/keys"
    seeds["keys"] = http_request("GET", keys, [("Host", "127.0.0.1:8080"), token])
    seeds["keys_if_none_match"] = http_request("GET", "/v1/recipients/alice/keys",
                                               [("Host", "127.0.0.1:8080"), token, ("If-None-Match", 'W/"41", "42"')])
    message = "/v1/messages/" + "0123456789abcdef" * 2
    seeds["status"] = http_request("GET", message, [("Host", "127.0.0.1:8080"), token])
    seeds["recall"] = http_request("DELETE", message, [("Host", "127.0.0.1:8080"), token])
    seeds["keep_alive"] = b"".join(seeds[name] for name in sorted(seeds) if name != "readme_python") + seeds.get("readme_python", b"")
    return seeds


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip())
        return 2
    out = argv[0]
    wire = os.path.join(out, "wire-decoder")
    session = os.path.join(out, "session-read-path")
    os.makedirs(wire, exist_ok=True)
    os.makedirs(session, exist_ok=True)
    count = 0
    for path in sorted(glob.glob(os.path.join(VECTORS, "*.vec"))):
        vectors = read_vectors(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        for seed, (name, max_frame, data, _) in enumerate(vectors):
            split = bytes([0, 0, seed & 0xFF, 1])
            write(wire, name, bytes([frame_index(max_frame)]) + split + data)
            for flags, label in ((0x00, "first"), (0x01, "after_hello"), (0x03, "gateway")):
                write(session, "%s_%s" % (name, label), bytes([flags]) + split + data)
            count += 1
        stream = b"".join(data for _, max_frame, data, whole in vectors if whole and max_frame == 65536)
        write(wire, "stream_" + stem, bytes([2, 0, 0, 7, 3]) + stream)
        write(session, "stream_" + stem, bytes([0x01, 0, 0, 7, 3]) + stream)
    http = os.path.join(out, "http-request-path")
    os.makedirs(http, exist_ok=True)
    seeds = readme_http_seeds()
    for name, data in seeds.items():
        write(http, name, data)
    print("%d vectors and %d HTTP requests written as seeds to %s" % (count, len(seeds), out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
