#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora from the golden vectors (protocol/vectors/*.vec).

    python3 fuzz/make_corpus.py OUT_DIR

OUT_DIR/wire-decoder/ gets, per vector, its bytes behind the 5-byte prefix that
fuzz/WireDecoder.swift reads (the vector's max_frame, a split seed); OUT_DIR/
session-read-path/ gets each vector both as a connection's first frame and after the
valid HELLO the target prepends on request (fuzz/SessionReadPath.swift), under each
service's requests. Both also get each file's whole frames as one stream.
"""

import glob
import os
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
    print("%d vectors written as seeds to %s" % (count, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
