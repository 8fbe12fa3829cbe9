import COpenSSL
import Foundation

/// NATS' JWT authentication made without `nsc`: an operator, a system account, an account
/// with JetStream and a user of it, their nkeys and JWTs signed here with Ed25519. Gives
/// the nats-server config (operator, memory resolver with both accounts preloaded) and the
/// user's credentials file, as `nsc generate creds` writes it.
public struct NATSDecentralizedAuth {
    /// The nats-server config lines (`-c FILE`).
    public let serverConfig: String
    /// The `.creds` text: the user's JWT and nkey seed.
    public let credentials: String

    /// - Parameter userIssuedByStranger: the user's JWT signed by an account the server
    ///   does not know, for a refused connection.
    public init(userIssuedByStranger: Bool = false) throws {
        let operatorKey = try NKey(.operator)
        let system = try NKey(.account)
        let account = try NKey(.account)
        let stranger = try NKey(.account)
        let user = try NKey(.user)
        let operatorJWT = try Self.jwt(issuer: operatorKey, subject: operatorKey, name: "test-operator",
                                       nats: ["type": "operator", "version": 2])
        let systemJWT = try Self.jwt(issuer: operatorKey, subject: system, name: "SYS", nats: ["type": "account", "version": 2])
        let unlimited: [String: Any] = [
            "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": true, "conn": -1, "leaf": -1,
            "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1,
        ]
        let accountJWT = try Self.jwt(issuer: operatorKey, subject: account, name: "push",
                                      nats: ["type": "account", "version": 2, "limits": unlimited])
        let userJWT = try Self.jwt(issuer: userIssuedByStranger ? stranger : account, subject: user, name: "gateway",
                                   nats: ["type": "user", "version": 2, "pub": [String: Any](), "sub": [String: Any](),
                                          "subs": -1, "data": -1, "payload": -1])
        serverConfig = """
            operator: "\(operatorJWT)"
            system_account: \(system.publicKey)
            resolver: MEMORY
            resolver_preload: {
              \(account.publicKey): "\(accountJWT)"
              \(system.publicKey): "\(systemJWT)"
            }

            """
        credentials = """
            -----BEGIN NATS USER JWT-----
            \(userJWT)
            ------END NATS USER JWT------

            ************************* IMPORTANT *************************
            NKEY Seed printed below can be used to sign and prove identity.
            NKEYs are sensitive and should be treated as secrets.

            -----BEGIN USER NKEY SEED-----
            \(user.seed)
            ------END USER NKEY SEED------

            *************************************************************

            """
    }

    private static func jwt(issuer: NKey, subject: NKey, name: String, nats: [String: Any]) throws -> String {
        let header = base64URL(Data(#"{"typ":"JWT","alg":"ed25519-nkey"}"#.utf8))
        var id = [UInt8](repeating: 0, count: 20)
        for index in id.indices { id[index] = UInt8.random(in: 0...255) }
        let claims: [String: Any] = [
            "jti": NKey.base32(id), "iat": Int(Date().timeIntervalSince1970), "iss": issuer.publicKey, "name": name,
            "sub": subject.publicKey, "nats": nats,
        ]
        let body = base64URL(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        let signed = header + "." + body
        return signed + "." + base64URL(Data(try issuer.sign(Array(signed.utf8))))
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// An Ed25519 key in NATS' nkey encoding: base32 of a role prefix byte, the key and a
/// CRC-16 (XMODEM) of both, little-endian.
struct NKey {
    enum Role: UInt8 {
        case `operator` = 112  // 14 << 3: 'O'
        case account = 0       // 'A'
        case user = 160        // 20 << 3: 'U'
    }

    let seed: String
    let publicKey: String
    private let rawSeed: [UInt8]

    init(_ role: Role) throws {
        var raw = [UInt8](repeating: 0, count: 32)
        guard RAND_bytes(&raw, 32) == 1 else { throw ServiceError.failed("RAND_bytes failed") }
        rawSeed = raw
        let key = try Self.key(raw)
        defer { EVP_PKEY_free(key) }
        var publicBytes = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key, &publicBytes, &length) == 1, length == 32 else {
            throw ServiceError.failed("EVP_PKEY_get_raw_public_key failed")
        }
        publicKey = Self.encode([role.rawValue] + publicBytes)
        // The seed's two prefix bytes hold 'S' (18 << 3) and the role, 5 bits each.
        seed = Self.encode([(18 << 3) | (role.rawValue >> 5), (role.rawValue & 31) << 3] + raw)
    }

    func sign(_ message: [UInt8]) throws -> [UInt8] {
        let key = try Self.key(rawSeed)
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { throw ServiceError.failed("EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(context) }
        var signature = [UInt8](repeating: 0, count: 64)
        var length = 64
        guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1,
              EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == 64
        else { throw ServiceError.failed("Ed25519 signing failed") }
        return signature
    }

    private static func key(_ seed: [UInt8]) throws -> OpaquePointer {
        guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, seed.count) else {
            throw ServiceError.failed("EVP_PKEY_new_raw_private_key failed")
        }
        return key
    }

    private static func encode(_ bytes: [UInt8]) -> String {
        let checksum = crc16(bytes)
        return base32(bytes + [UInt8(checksum & 0xFF), UInt8(checksum >> 8)])
    }

    static func crc16(_ bytes: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return crc
    }

    /// RFC 4648 base32, without padding.
    static func base32(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var output = ""
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                output.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { output.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return output
    }
}
