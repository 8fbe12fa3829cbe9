import PushEventLoop

/// How long a store's forwarder leaves each of its gateway addresses alone after that
/// gateway answered a push BUSY ([4.13-13]: a cluster node cut off from the others). With
/// several addresses the forwarder moves on to the next one at the first BUSY, so a node
/// that can reach the devices takes the retry at once; this keeps the rotation from
/// flapping when every node answers BUSY: an address is sent to again only after its
/// pause, which doubles (up to `maxMs`) with each BUSY that follows a pause, and ends at
/// its next PUSH_ACK. Pure logic, so that tests can step it.
struct GatewayBusyPauses {
    struct Pause: Equatable {
        var untilMs: Int64
        var lengthMs: Int64
    }

    static let firstMs: Int64 = 1_000
    static let maxMs: Int64 = 8_000

    private(set) var pauses: [HostPort: Pause] = [:]

    /// `address` answered BUSY at `nowMs`: true when this starts a pause (move on), false
    /// for the BUSYs of pushes sent before it (the same pause).
    mutating func busy(at address: HostPort, nowMs: Int64) -> Bool {
        if let pause = pauses[address], nowMs < pause.untilMs { return false }
        let length = pauses[address].map { min($0.lengthMs * 2, GatewayBusyPauses.maxMs) } ?? GatewayBusyPauses.firstMs
        pauses[address] = Pause(untilMs: nowMs + length, lengthMs: length)
        return true
    }

    /// `address` answered PUSH_ACK: it is paused no more.
    mutating func acknowledged(at address: HostPort) {
        pauses[address] = nil
    }

    /// How long to wait before sending to `address`; 0 when it may be sent to now.
    func waitMs(at address: HostPort, nowMs: Int64) -> Int64 {
        guard let pause = pauses[address] else { return 0 }
        return max(0, pause.untilMs - nowMs)
    }
}
