import Crypto
import Foundation
import PushWire
import Testing

/// protocol/vectors/rfc9180-a21.json: RFC 9180 A.2.1 (suite 1's HPKE), copied unchanged from
/// swift-crypto's test folder.
struct RFC9180Vector: Decodable {
    struct Encryption: Decodable { let seq: Int; let aad, ct, nonce, pt: String }
    struct Export: Decodable { let exporter_context: String; let L: Int; let exported_value: String }
    struct Vector: Decodable {
        let mode, kem_id, kdf_id, aead_id: Int
        let info, skRm, skEm, pkRm, pkEm, enc: String
        let encryptions: [Encryption]
        let exports: [Export]
    }
    let vector: Vector

    static func load() throws -> Vector {
        try JSONDecoder().decode(RFC9180Vector.self, from: try SealingVectorFiles.data("rfc9180-a21.json")).vector
    }
}

/// protocol/vectors/xwing-kem.json: X-Wing's KEM vectors (suite 2's KEM), as swift-crypto ships them.
struct XWingVectors: Decodable {
    struct Vector: Decodable { let seed, sk, pk, ct, ss: String }
    let vectors: [Vector]

    static func load() throws -> [Vector] {
        try JSONDecoder().decode(XWingVectors.self, from: try SealingVectorFiles.data("xwing-kem.json")).vectors
    }
}

@Suite struct HPKEVectorTests {
    /// [7.6-3] Suite 1 is RFC 9180's DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305
    /// in base mode: swift-crypto's recipient, as the device uses it, reproduces A.2.1.
    @Test func rfc9180BaseX25519ChaCha() throws {
        let v = try RFC9180Vector.load()
        #expect(v.mode == 0 && v.kem_id == 0x20 && v.kdf_id == 1 && v.aead_id == 3)
        let skR = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: try hexBytes(v.skRm))
        #expect(Array(skR.publicKey.rawRepresentation) == (try hexBytes(v.pkRm)))
        let skE = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: try hexBytes(v.skEm))
        #expect(Array(skE.publicKey.rawRepresentation) == (try hexBytes(v.pkEm)))
        #expect(v.pkEm == v.enc)

        var recipient = try HPKE.Recipient(privateKey: skR, ciphersuite: .Curve25519_SHA256_ChachaPoly,
                                           info: Data(try hexBytes(v.info)), encapsulatedKey: Data(try hexBytes(v.enc)))
        // The context's sequence number advances with each open: in order from 0.
        let encryptions = v.encryptions.sorted { $0.seq < $1.seq }
        #expect(encryptions.map(\.seq) == Array(0...256))
        for encryption in encryptions {
            let opened = try recipient.open(try hexBytes(encryption.ct), authenticating: try hexBytes(encryption.aad))
            #expect(Array(opened) == (try hexBytes(encryption.pt)), "encryption \(encryption.seq)")
        }
        #expect(v.exports.count == 3)
        for export in v.exports {
            let secret = try recipient.exportSecret(context: try hexBytes(export.exporter_context), outputByteCount: export.L)
            #expect(secret.withUnsafeBytes { Array($0) } == (try hexBytes(export.exported_value)))
        }
    }

    /// A stanza opened with another info fails: the binding of 7.6-3 lives in info alone.
    @Test func rfc9180OtherInfoFails() throws {
        let v = try RFC9180Vector.load()
        let skR = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: try hexBytes(v.skRm))
        var recipient = try HPKE.Recipient(privateKey: skR, ciphersuite: .Curve25519_SHA256_ChachaPoly,
                                           info: Data(try hexBytes(v.info) + [0]), encapsulatedKey: Data(try hexBytes(v.enc)))
        let first = try #require(v.encryptions.first { $0.seq == 0 })
        #expect(throws: (any Error).self) { try recipient.open(try hexBytes(first.ct), authenticating: try hexBytes(first.aad)) }
    }

    /// [7.6-3] Suite 2's KEM is X-Wing: the public key from the 32-byte seed, and
    /// decapsulation, match the draft's vectors. (Encapsulation takes randomness no public
    /// API fixes.)
    @Test func xwingKEM() throws {
        let vectors = try XWingVectors.load()
        #expect(vectors.count == 3)
        for vector in vectors {
            #expect(vector.seed == vector.sk)
            let key = try XWingMLKEM768X25519.PrivateKey(seedRepresentation: try hexBytes(vector.seed), publicKey: nil)
            #expect(Array(key.publicKey.rawRepresentation) == (try hexBytes(vector.pk)))
            let secret = try key.decapsulate(Data(try hexBytes(vector.ct)))
            #expect(secret.withUnsafeBytes { Array($0) } == (try hexBytes(vector.ss)))
        }
    }
}
