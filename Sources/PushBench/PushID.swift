import PushWire

/// The notification id the push and fanout scenarios send: the operation's token in the
/// first 4 bytes and a per-run random nonce in the other 12, so a device maps a PUSH to
/// its operation without a lookup, and a push left over from an earlier run (the gateway
/// redelivers unacknowledged pushes on reconnect) is recognised and only acknowledged.
struct PushIDs {
    private let nonceHigh: UInt64
    private let nonceLow: UInt64

    init() {
        let random = PayloadID.random()
        nonceHigh = random.high & 0xFFFF_FFFF
        nonceLow = random.low
    }

    func id(for token: UInt32) -> PayloadID {
        PayloadID(high: UInt64(token) << 32 | nonceHigh, low: nonceLow)
    }

    /// The token in a PUSH's id, or nil for an id this run did not send.
    func token(in id: UnsafeRawBufferPointer) -> UInt32? {
        guard let parsed = PayloadID(bytes: id), parsed.high & 0xFFFF_FFFF == nonceHigh, parsed.low == nonceLow else { return nil }
        return UInt32(truncatingIfNeeded: parsed.high >> 32)
    }
}
