import PushSecurity
import PushWire

/// A SEND's idempotency key within the provider that sent it ([4.17-5], [4.17-7]).
public struct IdempotencyKey: Sendable, Hashable {
    /// Whose key it is: every holder of the deployment's provider key is one provider.
    public var scope: String
    public var key: String

    public init(scope: String, key: String) {
        self.scope = scope
        self.key = key
    }

    /// Keys are exact bytes ([3.3-8]): no two spellings of one text are the same key.
    public static func == (lhs: IdempotencyKey, rhs: IdempotencyKey) -> Bool {
        lhs.scope.isExactly(rhs.scope) && lhs.key.isExactly(rhs.key)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ExactName(scope))
        hasher.combine(ExactName(key))
    }

    /// The scope of SENDs from connections with a provider credential ([4.17-7]).
    public static let providerScope = "provider"
}

/// The first SEND accepted with a key, as recorded with its payload: what a retry is
/// answered with, and what it must equal ([4.17-5]).
public struct IdempotencyRecord: Sendable, Equatable {
    public var key: IdempotencyKey
    /// `IdempotencyRecord.requestHash` of that SEND.
    public var requestHash: [UInt8]
    public var id: PayloadID
    /// The payload's expiry, unix ms: SEND_OK's `expires_at` when replayed.
    public var payloadExpiresAt: UInt64
    /// Unix ms; the key is forgotten after it: exactly `lifetimeMs` after the SEND's
    /// payload was created, so that the record holds that time too (`sendCreatedAt`).
    public var expiresAt: UInt64

    public init(key: IdempotencyKey, requestHash: [UInt8], id: PayloadID, payloadExpiresAt: UInt64, expiresAt: UInt64) {
        self.key = key
        self.requestHash = requestHash
        self.id = id
        self.payloadExpiresAt = payloadExpiresAt
        self.expiresAt = expiresAt
    }

    /// How long a key is remembered ([4.17-5]). A record outlives no build that changes
    /// this: a key lives 24 h, a build longer than that, and `sendCreatedAt` reads it back.
    public static let lifetimeMs: UInt64 = 24 * 3600 * 1000

    /// Whether the key still holds at `nowMs` ([4.17-5]); once it does not, a SEND with it
    /// takes it from this record's row (`NewPayload.keyTakenFromExpiry`).
    public func holds(atMs nowMs: UInt64) -> Bool { expiresAt > nowMs }

    /// When the SEND's payload was created (unix ms): a replay's answer repeats it, as it
    /// repeats the id and the expiry ([4.17-5]). Records of builds before this one set the
    /// key's expiry from a clock read a moment before the payload's, so theirs may be a
    /// millisecond or so early.
    public var sendCreatedAt: UInt64 { expiresAt >= IdempotencyRecord.lifetimeMs ? expiresAt - IdempotencyRecord.lifetimeMs : 0 }

    /// A digest of everything in `send` but its key, with the defaults filled in, so that
    /// two SENDs that mean the same (one naming the default, one leaving it out) are equal.
    public static func requestHash(_ send: SendRequest) -> [UInt8] {
        var writer = FieldWriter()
        let target = send.target ?? .user(send.user)
        writer.append(.user, send.user)
        // The content in its form's tag: a plain SEND hashes as it did before sealing came.
        writer.append(send.form.tag, send.payload)
        writer.append(.ttlSeconds, send.ttlSeconds)
        writer.append(.readLimit, send.readLimit)
        writer.append(.targetKind, target.kind)
        writer.append(.target, target.name)
        writer.append(.alert, UInt8(send.alert ? 1 : 0))
        writer.append(.priority, send.priority)
        writer.append(.collapseKey, send.collapseKey ?? "")
        writer.append(.pushTTLSeconds, send.pushTTLSeconds ?? send.ttlSeconds)
        return HMACSHA256.authenticate(writer.bytes, key: Array("securepush-send-request-v1".utf8))
    }
}
