import PushWire

/// A SEND's push as the store keeps it until a gateway has answered it ([4.17-3],
/// [4.17-4]): the payload's sequence, the PUSH to hand over, and when the payload expires,
/// which bounds the push's TTL.
public struct OutboxEntry: Sendable, Equatable {
    public var sequence: UInt64
    /// Its id is the payload's id; `user` the recipient; `once` set.
    public var push: Push
    /// Unix ms, as the payload's.
    public var expiresAt: UInt64
    /// Unix ms, as the payload's: the forward latency is measured from it.
    public var createdAt: UInt64

    public init(sequence: UInt64, push: Push, expiresAt: UInt64, createdAt: UInt64) {
        self.sequence = sequence
        self.push = push
        self.expiresAt = expiresAt
        self.createdAt = createdAt
    }

    /// The PUSH as sent at `nowMs`: its TTL no longer than what is left of the payload's
    /// life; nil once the payload has expired ([4.17-3], [4.17-4]).
    public func pushToSend(nowMs: UInt64) -> Push? {
        guard expiresAt > nowMs else { return nil }
        var push = push
        let secondsLeft = (expiresAt - nowMs) / 1000
        push.ttlSeconds = UInt32(clamping: min(UInt64(push.ttlSeconds), secondsLeft))
        return push
    }

    /// The PUSH's fields as the wire encodes them (SPEC.md 4.13): what the database keeps.
    public static func encode(_ push: Push) -> [UInt8] {
        var writer = FieldWriter()
        push.writeFields(to: &writer)
        return writer.bytes
    }

    /// The PUSH kept by `encode`; nil for bytes that do not decode (a row damaged by hand).
    public static func decode(_ bytes: [UInt8]) -> Push? {
        bytes.withUnsafeBytes { body in try? Push(body: body) }
    }
}

/// A gateway's PUSH_ACK for an outbox entry, to be recorded for STATUS ([4.12-2]).
public struct HandedPush: Sendable, Equatable {
    public var sequence: UInt64
    public var ack: PushAck
    /// Unix ms.
    public var handedAt: UInt64

    public init(sequence: UInt64, ack: PushAck, handedAt: UInt64) {
        self.sequence = sequence
        self.ack = ack
        self.handedAt = handedAt
    }
}

/// How pushes waiting in the outbox are recorded, in every backend.
public enum OutboxState: Int64, Sendable {
    /// No gateway has answered the push yet.
    case waiting = 1
    /// A gateway answered it; its counts are kept.
    case handed = 2
}
