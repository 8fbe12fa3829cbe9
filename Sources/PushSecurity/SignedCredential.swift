import PushWire

/// Why a token or credential was refused; each maps to its own wire status.
public enum CredentialError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed
    case badSignature
    case expired

    public var status: Status {
        switch self {
        case .malformed, .badSignature: .badToken
        case .expired: .tokenExpired
        }
    }

    public var description: String {
        switch self {
        case .malformed: "credential is malformed"
        case .badSignature: "credential signature does not verify"
        case .expired: "credential has expired"
        }
    }
}

/// Signs and opens the self-contained credentials of SPEC.md section 7: a version byte,
/// a body of fields in the wire encoding, and an HMAC-SHA256 over both.
public struct CredentialSigner: Sendable {
    public static let formatVersion: UInt8 = 1
    public static let fetchTokenPurpose = "securepush fetch-token v1"
    public static let registrationPurpose = "securepush registration v1"

    private let key: [UInt8]

    /// The signer for one purpose, its key derived from the deployment's server key.
    public init(serverKey: SecretKey, purpose: String) {
        key = serverKey.derive(purpose: purpose).bytes
    }

    public func sign(_ writeFields: (inout FieldWriter) -> Void) -> [UInt8] {
        var writer = FieldWriter(into: [CredentialSigner.formatVersion])
        writeFields(&writer)
        var signed = writer.bytes
        signed += HMACSHA256.authenticate(signed, key: key)
        return signed
    }

    /// `open`, with every failure of `read` (a faulty body) reported as malformed.
    func openTyped<T>(_ credential: [UInt8], _ read: (UnsafeRawBufferPointer) throws -> T) throws(CredentialError) -> T {
        do {
            return try open(credential, read)
        } catch let error as CredentialError {
            throw error
        } catch {
            throw .malformed
        }
    }

    /// Checks version and signature and hands the verified body to `read`.
    public func open<T>(_ credential: [UInt8], _ read: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        let macStart = credential.count - HMACSHA256.byteCount
        guard macStart >= 1, credential[0] == CredentialSigner.formatVersion else { throw CredentialError.malformed }
        return try credential.withUnsafeBytes { raw in
            let signed = UnsafeRawBufferPointer(rebasing: raw[..<macStart])
            let expected = HMACSHA256.authenticate(signed, key: key)
            let valid = expected.withUnsafeBytes { HMACSHA256.constantTimeEqual($0, UnsafeRawBufferPointer(rebasing: raw[macStart...])) }
            guard valid else { throw CredentialError.badSignature }
            return try read(UnsafeRawBufferPointer(rebasing: raw[1..<macStart]))
        }
    }
}

/// What LOGIN hands a device: who it is and until when it may FETCH.
public struct FetchToken: Equatable, Sendable {
    public static let fieldTable: FieldTable = [.user, .deviceID, .expiresAt, .issuedAt]
    public var user: String
    public var deviceID: String
    /// Unix milliseconds.
    public var issuedAt: UInt64
    public var expiresAt: UInt64

    public init(user: String, deviceID: String, issuedAt: UInt64, expiresAt: UInt64) {
        self.user = user
        self.deviceID = deviceID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }

    public func signed(by signer: CredentialSigner) -> [UInt8] {
        signer.sign { writer in
            writer.append(.user, user)
            writer.append(.deviceID, deviceID)
            writer.append(.expiresAt, expiresAt)
            writer.append(.issuedAt, issuedAt)
        }
    }

    /// Verifies the signature first, then the expiry against `nowMs`.
    public static func open(_ token: [UInt8], signer: CredentialSigner, nowMs: UInt64) throws(CredentialError) -> FetchToken {
        let parsed = try signer.openTyped(token) { body in
            let fields = try FieldSet(body: body, allowed: fieldTable, type: .login)
            return FetchToken(user: try fields.required(.user, FieldSet.string),
                              deviceID: try fields.required(.deviceID, FieldSet.string),
                              issuedAt: try fields.required(.issuedAt, FieldSet.uint64),
                              expiresAt: try fields.required(.expiresAt, FieldSet.uint64))
        }
        guard parsed.expiresAt > nowMs else { throw .expired }
        return parsed
    }
}

/// A device's long-lived registration with the gateway: its id, its user and its tags.
public struct Registration: Equatable, Sendable {
    public static let fieldTable: FieldTable = [.user, .deviceID, .expiresAt, .tags, .issuedAt]
    /// What leaves a HELLO carrying it within the 1024 bytes a server accepts before
    /// HELLO_OK ([7.4-3], [5.1-7]).
    public static let maxSignedBytes = 896
    /// The text of a gateway's BAD_CREDENTIALS for a registration its registry does not
    /// hold enrolled. `device run` knows it: right after an enrolment it may only mean the
    /// gateway has not heard of it yet.
    public static let notEnrolledReply = "registration not enrolled"
    public var deviceID: String
    public var user: String
    public var tags: [String]
    public var issuedAt: UInt64
    public var expiresAt: UInt64

    public init(deviceID: String, user: String, tags: [String], issuedAt: UInt64, expiresAt: UInt64) {
        self.deviceID = deviceID
        self.user = user
        self.tags = tags
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }

    public func signed(by signer: CredentialSigner) -> [UInt8] {
        signer.sign { writer in
            writer.append(.user, user)
            writer.append(.deviceID, deviceID)
            writer.append(.expiresAt, expiresAt)
            if !tags.isEmpty { writer.append(.tags, tags.joined(separator: "\n")) }
            writer.append(.issuedAt, issuedAt)
        }
    }

    /// The fields of a registration without checking its signature: what a device reads
    /// from its own credential file (it has no key to check with; the gateway checks).
    public static func readUnverified(_ credential: [UInt8]) -> Registration? {
        guard credential.count > 1 + HMACSHA256.byteCount, credential[0] == CredentialSigner.formatVersion else { return nil }
        return credential.withUnsafeBytes { raw -> Registration? in
            let body = UnsafeRawBufferPointer(rebasing: raw[1..<(credential.count - HMACSHA256.byteCount)])
            guard let fields = try? FieldSet(body: body, allowed: fieldTable, type: .hello),
                  let deviceID = fields.string(.deviceID), let user = fields.string(.user) else { return nil }
            return Registration(deviceID: deviceID, user: user, tags: (fields.string(.tags) ?? "").split(separator: "\n").map(String.init),
                                issuedAt: fields.uint64(.issuedAt) ?? 0, expiresAt: fields.uint64(.expiresAt) ?? 0)
        }
    }

    /// Verifies signature, then expiry ([7.4-4]).
    public static func open(_ credential: [UInt8], signer: CredentialSigner, nowMs: UInt64) throws(CredentialError) -> Registration {
        let parsed = try signer.openTyped(credential) { body in
            let fields = try FieldSet(body: body, allowed: fieldTable, type: .hello)
            return Registration(deviceID: try fields.required(.deviceID, FieldSet.string),
                                user: try fields.required(.user, FieldSet.string),
                                tags: try tagNames(fields),
                                issuedAt: try fields.required(.issuedAt, FieldSet.uint64),
                                expiresAt: try fields.required(.expiresAt, FieldSet.uint64))
        }
        guard parsed.expiresAt > nowMs else { throw .expired }
        return parsed
    }

    /// The names of `tags` ([7.4-2]): split at each `0a`, each an identifier ([3.3-8]),
    /// so that no other control character (a `0d` before the `0a`, a NUL) rides in one.
    static func tagNames(_ fields: FieldSet) throws(WireError) -> [String] {
        guard let raw = fields.bytes(.tags) else { return [] }
        var names: [String] = []
        for piece in raw.split(separator: 0x0A) {
            guard let name = String(validating: piece, as: UTF8.self) else { throw .badFieldValue(.tags) }
            guard Identifier.controlCharacter(in: name) == nil else { throw .controlCharacter(.tags) }
            names.append(name)
        }
        return names
    }
}
