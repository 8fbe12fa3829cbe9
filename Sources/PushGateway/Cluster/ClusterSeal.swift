import PushSecurity

/// Why a cluster message or queue record was not trusted.
/// Why a cluster message or queue record was not trusted. The raw value is the `reason`
/// label of `securepush_gateway_cluster_messages_rejected_total` and of the log line.
enum ClusterAuthError: String, Error, Equatable, CaseIterable {
    /// Not sealed at all: written by a build before authentication, or by a client without the key.
    case unsealed
    case truncated
    /// The tag does not match: forged, altered, or moved from another subject.
    case badTag = "bad_tag"
    /// Sealed by one node, but the body names another.
    case wrongSender = "sender"
    /// Its time is outside the window around the receiver's clock (or, for a queue
    /// record, around the time JetStream stored it).
    case stale = "clock"
    /// A nonce already seen within the window.
    case replayed
}

/// The authentication of what nodes send each other and keep in JetStream (protocol/CLUSTER.md,
/// "Authentication"). A NATS account is shared with whatever else the operator lets in;
/// the deployment's server key is not, and every node of a deployment has it:
///
///     03 | sender length (u8) | sender | sent_at_ms (u64 BE) | nonce (u64 BE) | message | tag (32)
///     tag = HMAC-SHA256(cluster key, subject length (u16 BE) | subject | every byte before the tag)
///
/// The subject is in the tag, so a message cannot be moved to another subject (another
/// node, another device's queue); the sender is, so one member cannot be made to speak
/// for another.
struct ClusterSeal {
    static let version: UInt8 = 3
    static let tagSize = HMACSHA256.byteCount
    /// Added to every message: version, sender length, time, nonce and tag, besides the sender's name.
    static let overhead = 1 + 1 + 8 + 8 + tagSize
    static let keyPurpose = "securepush cluster messages v1"

    private let key: [UInt8]

    init(serverKey: SecretKey) {
        key = serverKey.derive(purpose: ClusterSeal.keyPurpose).bytes
    }

    struct Opened: Equatable {
        var sender: String
        var sentAtMs: UInt64
        var nonce: UInt64
        var message: [UInt8]
    }

    func seal(_ message: [UInt8], subject: String, sender: String, sentAtMs: UInt64, nonce: UInt64) -> [UInt8] {
        let name = Array(sender.utf8.prefix(255))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ClusterSeal.overhead + name.count + message.count)
        bytes.append(ClusterSeal.version)
        bytes.append(UInt8(name.count))
        bytes.append(contentsOf: name)
        ClusterSeal.append(sentAtMs, to: &bytes)
        ClusterSeal.append(nonce, to: &bytes)
        bytes.append(contentsOf: message)
        bytes.append(contentsOf: tag(subject: subject, bytes[...]))
        return bytes
    }

    func open(_ bytes: [UInt8], subject: String) throws(ClusterAuthError) -> Opened {
        guard bytes.first == ClusterSeal.version else { throw .unsealed }
        guard bytes.count >= ClusterSeal.overhead else { throw .truncated }
        let nameLength = Int(bytes[1])
        let messageStart = 2 + nameLength + 16
        let tagStart = bytes.count - ClusterSeal.tagSize
        guard messageStart <= tagStart else { throw .truncated }
        let expected = tag(subject: subject, bytes[..<tagStart])
        let matches = expected.withUnsafeBytes { expected in
            bytes[tagStart...].withUnsafeBytes { HMACSHA256.constantTimeEqual(expected, $0) }
        }
        guard matches else { throw .badTag }
        return Opened(sender: String(decoding: bytes[2..<(2 + nameLength)], as: UTF8.self),
                      sentAtMs: ClusterSeal.integer(bytes[(2 + nameLength)...]),
                      nonce: ClusterSeal.integer(bytes[(2 + nameLength + 8)...]),
                      message: Array(bytes[messageStart..<tagStart]))
    }

    private func tag(subject: String, _ sealed: ArraySlice<UInt8>) -> [UInt8] {
        let name = Array(subject.utf8)
        var input: [UInt8] = []
        input.reserveCapacity(2 + name.count + sealed.count)
        input.append(UInt8(truncatingIfNeeded: name.count >> 8))
        input.append(UInt8(truncatingIfNeeded: name.count))
        input.append(contentsOf: name)
        input.append(contentsOf: sealed)
        return HMACSHA256.authenticate(input, key: key)
    }

    private static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    /// The big-endian u64 at the start of `bytes` (which holds at least 8).
    private static func integer(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// The replay rule for node-to-node messages: a message is taken only if its time is
/// within `windowMs` of the receiver's clock and its nonce was not seen within the window.
/// Nonces are kept in two generations, each `2 × windowMs` long, so every nonce is
/// remembered for at least as long as its time stays acceptable, and memory is bounded by
/// the messages of at most four windows.
struct ClusterReplayGuard {
    let windowMs: UInt64
    private var current: Set<UInt64> = []
    private var previous: Set<UInt64> = []
    private var generationStartMs: UInt64?

    init(windowMs: UInt64) { self.windowMs = windowMs }

    var remembered: Int { current.count + previous.count }

    mutating func admit(sentAtMs: UInt64, nonce: UInt64, nowMs: UInt64) throws(ClusterAuthError) {
        guard sentAtMs <= nowMs &+ windowMs, nowMs <= sentAtMs &+ windowMs else { throw .stale }
        let start = generationStartMs ?? nowMs
        if nowMs >= start &+ 2 * windowMs {
            // Two generations old or more: nothing in `previous` can pass the time check.
            previous = nowMs >= start &+ 4 * windowMs ? [] : current
            current = []
            generationStartMs = nowMs
        } else if generationStartMs == nil {
            generationStartMs = nowMs
        }
        guard !previous.contains(nonce), current.insert(nonce).inserted else { throw .replayed }
    }
}
