@testable import PushSealing
import PushWire
import Testing

@Suite struct DeviceKeyCheckTests {
    /// The X25519 public keys of small order (libsodium's blocklist, RFC 7748 section 7): 0,
    /// 1, the two points of order 8, p - 1, p and p + 1, and each with the top bit set (which
    /// X25519 ignores). pyca/cryptography refuses an agreement with every one of them.
    static let smallOrderKeys = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        // the same with the top bit set
        "0000000000000000000000000000000000000000000000000000000000000080",
        "0100000000000000000000000000000000000000000000000000000000000080",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b880",
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f11d7",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    ]

    /// [4.6-6] [7.6-3] RFC 9180 7.1.4: a small-order X25519 key makes every agreement zero, so the
    /// stanza's secret would be known to all. swift-crypto does not refuse it; we do.
    @Test(arguments: smallOrderKeys)
    func smallOrderRefused(hex: String) throws {
        let key = try hexBytes(hex)
        #expect(throws: SealingError.smallOrderKey) { try DeviceKeyCheck.validatePublicKey(suite: .x25519, bytes: key) }
    }

    @Test func goodKeysPass() throws {
        // The base point (u = 9) and RFC 7748 6.1's two public keys.
        for hex in ["0900000000000000000000000000000000000000000000000000000000000000",
                    "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
                    "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"] {
            try DeviceKeyCheck.validatePublicKey(suite: .x25519, bytes: try hexBytes(hex))
        }
        for suite in KeySuite.allCases {
            try DeviceKeyCheck.validatePublicKey(suite: suite, bytes: try DeviceKeyPair.generate(suite: suite).publicKey)
        }
    }

    /// [4.6-6] The registered key is exactly the suite's length (32 / 1216).
    @Test func wrongLengths() throws {
        let x25519 = try DeviceKeyPair.generate(suite: .x25519).publicKey
        let xwing = try DeviceKeyPair.generate(suite: .xwing).publicKey
        #expect(throws: SealingError.publicKeyLength(suite: .x25519, bytes: 1216)) {
            try DeviceKeyCheck.validatePublicKey(suite: .x25519, bytes: xwing)
        }
        #expect(throws: SealingError.publicKeyLength(suite: .xwing, bytes: 32)) {
            try DeviceKeyCheck.validatePublicKey(suite: .xwing, bytes: x25519)
        }
        #expect(throws: SealingError.publicKeyLength(suite: .x25519, bytes: 0)) {
            try DeviceKeyCheck.validatePublicKey(suite: .x25519, bytes: [])
        }
        #expect(throws: SealingError.publicKeyLength(suite: .x25519, bytes: 33)) {
            try DeviceKeyCheck.validatePublicKey(suite: .x25519, bytes: x25519 + [0])
        }
    }

    /// [4.6-6] An X-Wing key whose ML-KEM half has a coefficient >= q (all 0xff bytes) fails
    /// BoringSSL's parse; one whose X25519 half is zero fails its all-zero check.
    @Test func xwingRejected() throws {
        let good = try DeviceKeyPair.generate(suite: .xwing).publicKey
        #expect(throws: SealingError.publicKeyRejected(suite: .xwing)) {
            try DeviceKeyCheck.validatePublicKey(suite: .xwing, bytes: [UInt8](repeating: 0xff, count: 1184) + good.suffix(32))
        }
        #expect(throws: SealingError.publicKeyRejected(suite: .xwing)) {
            try DeviceKeyCheck.validatePublicKey(suite: .xwing, bytes: good.prefix(1184) + [UInt8](repeating: 0, count: 32))
        }
    }
}
