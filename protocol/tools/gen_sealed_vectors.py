#!/usr/bin/env python3
"""Writes protocol/vectors/sealed.txt: a worked example of the sealed payload (SPEC.md 7.6).

The sealer here is written from the spec alone, independent of the Swift code, over pyhpke,
whose HPKE sender takes a fixed ephemeral key (swift-crypto's does not), so the file is
deterministic. Every secret is the SHA-256 of an ASCII string the file names. The Swift tests
(Tests/PushSealingTests/SealedVectorTests.swift) open what is written here; CI only reads the
committed file and never runs this script.

    python3 -m venv /tmp/hpkevenv && /tmp/hpkevenv/bin/pip install pyhpke==0.6.5
    /tmp/hpkevenv/bin/python protocol/tools/gen_sealed_vectors.py            # write sealed.txt
    python3 protocol/tools/gen_sealed_vectors.py --check                     # check the committed file

--check needs only pyca/cryptography (>= 47, for its HPKE): it opens every device view of the
committed file with cryptography's own HPKE and ChaCha20-Poly1305, recomputes every derived
name, and refuses the moved stanza. With pyhpke present it also regenerates the file and
compares it byte for byte.
"""

import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTOR_FILE = os.path.join(os.path.dirname(HERE), "vectors", "sealed.txt")

VERSION = 1
SUITE_X25519 = 1            # DHKEM(X25519, HKDF-SHA256) 0x0020, HKDF-SHA256 0x0001, ChaCha20-Poly1305 0x0003
ENC_BYTES = 32
WRAPPED_BYTES = 32 + 16
STANZA_BYTES = 1 + 8 + ENC_BYTES + WRAPPED_BYTES
ID_LABEL = b"securepush sealed id v1"
KEY_ID_LABEL = b"securepush device key id v1"
INFO_LABEL = b"securepush sealed key v1"
BODY_LABEL = b"securepush sealed body v1"
BODY_NONCE = bytes(12)

RECIPIENT = "alice"
DEVICES = ["phone-1", "phone-2", "tablet"]
NOT_SEALED_FOR = "phone-4"
PLAINTEXT = "your code is 1234"


def secret(label):
    """A fixed stand-in for a CSPRNG draw: SHA-256 of the ASCII label."""
    return hashlib.sha256(label.encode()).digest()


def n(identifier):
    """n(s): one length byte and the UTF-8 bytes (identifiers are 1 to 64 bytes)."""
    data = identifier.encode()
    assert 1 <= len(data) <= 64
    return bytes([len(data)]) + data


def payload_id(seal_nonce):                                            # 7.6-1
    return hashlib.sha256(ID_LABEL + seal_nonce).digest()[:16]


def key_id(suite, device_id, public_key):                              # 7.6-2
    return hashlib.sha256(KEY_ID_LABEL + bytes([suite]) + n(device_id) + public_key).digest()[:8]


def stanza_info(pid, recipient, device_id, suite, kid):                # 7.6-3
    return INFO_LABEL + pid + n(recipient) + n(device_id) + bytes([suite]) + kid


def body_aad(pid, recipient):                                          # 7.6-4
    return BODY_LABEL + pid + n(recipient)


def x25519_public(private_key):
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    return X25519PrivateKey.from_private_bytes(private_key).public_key().public_bytes_raw()


def device_view(sealed, kid):
    """The store's FETCH_OK payload for the device whose key id is kid (suite-1 stanzas only here)."""
    count = sealed[17]
    stanzas = [sealed[18 + i * STANZA_BYTES:18 + (i + 1) * STANZA_BYTES] for i in range(count)]
    body = sealed[18 + count * STANZA_BYTES:]
    mine = [s for s in stanzas if s[1:9] == kid]
    return sealed[:17] + b"\x01" + mine[0] + body if mine else None


def fixed_inputs():
    devices = []
    for device_id in DEVICES:
        private_key = secret("securepush sealed vector device key " + device_id)
        public_key = x25519_public(private_key)
        devices.append({"id": device_id, "private_key": private_key, "public_key": public_key,
                        "key_id": key_id(SUITE_X25519, device_id, public_key),
                        "ephemeral_key": secret("securepush sealed vector ephemeral key " + device_id)})
    return {"seal_nonce": secret("securepush sealed vector seal nonce")[:16],
            "content_key": secret("securepush sealed vector content key"),
            "devices": devices}


def generate():
    """The vector, sealed with pyhpke's fixed-ephemeral-key sender: name -> value, in file order."""
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    from pyhpke import AEADId, CipherSuite, KDFId, KEMId, KEMKeyPair

    suite = CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.CHACHA20_POLY1305)
    inputs = fixed_inputs()
    seal_nonce, content_key = inputs["seal_nonce"], inputs["content_key"]
    pid = payload_id(seal_nonce)
    stanzas = b""
    infos = {}
    for device in inputs["devices"]:
        info = stanza_info(pid, RECIPIENT, device["id"], SUITE_X25519, device["key_id"])
        infos[device["id"]] = info
        ephemeral = KEMKeyPair(suite.kem.deserialize_private_key(device["ephemeral_key"]),
                               suite.kem.deserialize_public_key(x25519_public(device["ephemeral_key"])))
        enc, context = suite.create_sender_context(suite.kem.deserialize_public_key(device["public_key"]),
                                                   info=info, eks=ephemeral)
        wrapped = context.seal(content_key)                            # aad empty (7.6-3)
        assert len(enc) == ENC_BYTES and len(wrapped) == WRAPPED_BYTES
        stanzas += bytes([SUITE_X25519]) + device["key_id"] + enc + wrapped
    body = ChaCha20Poly1305(content_key).encrypt(BODY_NONCE, PLAINTEXT.encode(), body_aad(pid, RECIPIENT))
    sealed = bytes([VERSION]) + seal_nonce + bytes([len(inputs["devices"])]) + stanzas + body

    lines = [
        "# Worked example of SPEC.md 7.6, the sealed payload. Generated by protocol/tools/gen_sealed_vectors.py",
        "# (pyhpke 0.6.5, fixed ephemeral keys); do not edit. Lines are NAME VALUE; hex lowercase, text plain.",
        "# Every secret is SHA-256 of an ASCII string: 'securepush sealed vector device key DEVICE',",
        "# '... ephemeral key DEVICE', '... seal nonce' (first 16 bytes), '... content key'.",
        "# A real sealer draws seal_nonce, content_key and each ephemeral key from a CSPRNG.",
        "",
        "recipient " + RECIPIENT,
        "plaintext " + PLAINTEXT,
        "devices " + " ".join(DEVICES),
        "",
        "# suite 1: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305; private_key is the X25519",
        "# scalar as the device-key file stores it (7.5-6); key_id of 7.6-2",
    ]
    for device in inputs["devices"]:
        prefix = "device." + device["id"] + "."
        lines += [prefix + "suite 1",
                  prefix + "private_key " + device["private_key"].hex(),
                  prefix + "public_key " + device["public_key"].hex(),
                  prefix + "key_id " + device["key_id"].hex()]
    lines += ["", "# the payload: id of 7.6-1, body_aad of 7.6-4",
              "seal_nonce " + seal_nonce.hex(),
              "content_key " + content_key.hex(),
              "id " + pid.hex(),
              "body_aad " + body_aad(pid, RECIPIENT).hex(),
              "", "# each stanza: HPKE info of 7.6-3, the ephemeral key pyhpke was given, and enc"]
    for device in inputs["devices"]:
        prefix = "device." + device["id"] + "."
        lines += [prefix + "ephemeral_key " + device["ephemeral_key"].hex(),
                  prefix + "enc " + x25519_public(device["ephemeral_key"]).hex(),
                  prefix + "info " + infos[device["id"]].hex()]
    lines += ["", "# the full sealed payload (STORE/SEND sealed_payload)", "sealed " + sealed.hex(),
              "", "# each device's view (FETCH_OK sealed_payload): count 1 and its own stanza (4.19)"]
    for device in inputs["devices"]:
        lines.append("device." + device["id"] + ".view " + device_view(sealed, device["key_id"]).hex())

    unsealed_key = x25519_public(secret("securepush sealed vector device key " + NOT_SEALED_FOR))
    unsealed_kid = key_id(SUITE_X25519, NOT_SEALED_FOR, unsealed_key)
    assert device_view(sealed, unsealed_kid) is None
    # phone-1's stanza handed to phone-2 under phone-2's own key id: its info names phone-1.
    phone1, phone2 = inputs["devices"][0], inputs["devices"][1]
    view1 = device_view(sealed, phone1["key_id"])
    moved = view1[:19] + phone2["key_id"] + view1[27:]
    lines += ["", "# a device enrolled after the seal: no stanza, so FETCH answers NOT_SEALED_FOR_DEVICE",
              "not_sealed.device_id " + NOT_SEALED_FOR,
              "not_sealed.private_key " + secret("securepush sealed vector device key " + NOT_SEALED_FOR).hex(),
              "not_sealed.public_key " + unsealed_key.hex(),
              "not_sealed.key_id " + unsealed_kid.hex(),
              "", "# a moved stanza (7.6-5): phone-1's stanza relabelled with phone-2's key id; phone-2 cannot open it",
              "moved.device_id phone-2",
              "moved.view " + moved.hex()]
    return "\n".join(lines) + "\n"


def parse(text):
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.split(" ", 1)
            values[name] = value
    return values


def open_view(view, fetched_id, recipient, device_id, private_key):
    """The device's checks of 7.6-5, with pyca/cryptography's HPKE (not pyhpke). Raises on any failure."""
    from cryptography.hazmat.primitives import hpke
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    if view[0] != VERSION or view[17] != 1 or len(view) < 18 + STANZA_BYTES + 16:
        raise ValueError("not a device view")
    stanza, body = view[18:18 + STANZA_BYTES], view[18 + STANZA_BYTES:]
    kid = key_id(SUITE_X25519, device_id, x25519_public(private_key))
    if stanza[0] != SUITE_X25519 or stanza[1:9] != kid:
        raise ValueError("not sealed for this key")
    if payload_id(view[1:17]) != fetched_id:
        raise ValueError("fetched under another id")
    suite = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.CHACHA20_POLY1305)
    content_key = suite.decrypt(stanza[9:], X25519PrivateKey.from_private_bytes(private_key),
                                info=stanza_info(fetched_id, recipient, device_id, SUITE_X25519, kid))
    return ChaCha20Poly1305(content_key).decrypt(BODY_NONCE, body, body_aad(fetched_id, recipient))


def check(text):
    v = parse(text)
    recipient, pid = v["recipient"], bytes.fromhex(v["id"])
    sealed = bytes.fromhex(v["sealed"])
    assert payload_id(bytes.fromhex(v["seal_nonce"])) == pid, "id"
    assert body_aad(pid, recipient).hex() == v["body_aad"], "body_aad"
    assert sealed[1:17].hex() == v["seal_nonce"] and sealed[17] == len(v["devices"].split()), "header"
    for device_id in v["devices"].split():
        prefix = "device." + device_id + "."
        private_key = bytes.fromhex(v[prefix + "private_key"])
        public_key = x25519_public(private_key)
        kid = key_id(SUITE_X25519, device_id, public_key)
        assert public_key.hex() == v[prefix + "public_key"] and kid.hex() == v[prefix + "key_id"], device_id
        assert stanza_info(pid, recipient, device_id, SUITE_X25519, kid).hex() == v[prefix + "info"], device_id
        view = bytes.fromhex(v[prefix + "view"])
        assert view == device_view(sealed, kid), device_id
        assert open_view(view, pid, recipient, device_id, private_key) == v["plaintext"].encode(), device_id
        for wrong_user, wrong_id in (("bob", pid), (recipient, bytes(16))):
            try:
                open_view(view, wrong_id, wrong_user, device_id, private_key)
            except Exception:
                continue
            raise AssertionError("opened under another user or id: " + device_id)
    assert device_view(sealed, bytes.fromhex(v["not_sealed.key_id"])) is None, "not_sealed"
    moved_device = v["moved.device_id"]
    try:
        open_view(bytes.fromhex(v["moved.view"]), pid, recipient, moved_device,
                  bytes.fromhex(v["device." + moved_device + ".private_key"]))
    except Exception:
        pass
    else:
        raise AssertionError("the moved stanza opened")


def main():
    if sys.argv[1:] == ["--check"]:
        with open(VECTOR_FILE) as f:
            committed = f.read()
        check(committed)
        try:
            import pyhpke  # noqa: F401
        except ImportError:
            print("sealed.txt opens with pyca/cryptography (pyhpke absent: not regenerated)")
            return
        if generate() != committed:
            sys.exit("sealed.txt is out of date: run gen_sealed_vectors.py")
        print("sealed.txt opens with pyca/cryptography and regenerates byte for byte")
    elif sys.argv[1:] == []:
        text = generate()
        check(text)
        with open(VECTOR_FILE, "w") as f:
            f.write(text)
        print("wrote " + os.path.relpath(VECTOR_FILE))
    else:
        sys.exit("usage: gen_sealed_vectors.py [--check]")


if __name__ == "__main__":
    main()
