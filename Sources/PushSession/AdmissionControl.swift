/// Why a server turned a connection away (or closed it before HELLO_OK). The raw value
/// is the `reason` a log line and a metric carry.
public enum ConnectionRefusal: String, CaseIterable, Sendable {
    /// `ServiceLimits.maxPendingHandshakes` connections were already waiting for HELLO_OK.
    case pendingHandshakes = "pending_handshakes"
    /// `ServiceLimits.maxPendingPerAddress` connections from this address were already waiting.
    case pendingPerAddress = "pending_per_address"
    /// A HELLO arrived with `ServiceLimits.maxConnections` peers admitted: ERROR BUSY.
    case connectionLimit = "connection_limit"
    /// HELLO was not completed within `SessionTimeouts.handshakeMs`: GOAWAY TIMEOUT.
    case handshakeTimeout = "handshake_timeout"
    /// A started frame was not completed within `SessionTimeouts.frameMs`: GOAWAY TIMEOUT.
    case frameTimeout = "frame_timeout"
    /// The process had no file descriptor left: accepted and closed at once.
    case outOfFileDescriptors = "out_of_file_descriptors"
}

/// What a server reports about admission, for metrics.
public enum AdmissionEvent: Sendable, Equatable {
    /// A connection was refused (or closed before HELLO_OK) for this reason.
    case refused(ConnectionRefusal)
    /// The number of connections waiting for HELLO_OK changed to this.
    case pendingHandshakes(Int)
}

/// A server's connection counts by stage, with no I/O: connections waiting for HELLO_OK
/// (pending) have caps of their own, overall and per source address, and never take the
/// slots of admitted peers, which `ServiceLimits.maxConnections` counts alone. It also
/// counts refusals and rate-limits their log lines to one per second per reason.
///
/// The driver reports each step: `arrived` at accept; at HELLO `reserveSlot`, then
/// `admitted` (which takes the reserved slot) or `cancelReservation`; `closed` when the
/// connection ends; `refused` for every refusal. A slot is reserved by the same step
/// that checks the cap, so drivers on several threads sharing one count (behind a lock)
/// never admit past it.
public struct AdmissionControl<PeerID: Hashable> {
    public let maxPending: Int
    public let maxPendingPerAddress: Int
    public let maxAdmitted: Int
    /// The minimum time between two log lines for one reason.
    public let logIntervalMs: Int64

    /// Pending connections and the address each came from.
    private var pending: [PeerID: String] = [:]
    private var pendingByAddress: [String: Int] = [:]
    private var admitted: Set<PeerID> = []
    /// Slots promised by `reserveSlot` to HELLOs the service is still deciding on.
    private var reserved = 0
    private var refusalCounts = [Int](repeating: 0, count: ConnectionRefusal.allCases.count)
    /// Per reason: refusals not yet reported in a log line, and when the last line went out.
    private var unlogged = [Int](repeating: 0, count: ConnectionRefusal.allCases.count)
    private var lastLoggedAt = [Int64?](repeating: nil, count: ConnectionRefusal.allCases.count)

    public init(limits: ServiceLimits, logIntervalMs: Int64 = 1_000) {
        maxPending = limits.maxPendingHandshakes
        maxPendingPerAddress = limits.maxPendingPerAddress
        maxAdmitted = limits.maxConnections
        self.logIntervalMs = logIntervalMs
    }

    public var pendingCount: Int { pending.count }
    public var admittedCount: Int { admitted.count }
    public func pendingCount(from address: String) -> Int { pendingByAddress[address] ?? 0 }
    public func isPending(_ peer: PeerID) -> Bool { pending[peer] != nil }
    public func isAdmitted(_ peer: PeerID) -> Bool { admitted.contains(peer) }

    /// Refusals so far for this reason.
    public func refusals(_ reason: ConnectionRefusal) -> Int { refusalCounts[reason.index] }

    /// A connection was accepted from `address`: nil if it may wait for HELLO (it is now
    /// pending), or why it must be closed at once. The refusal is not counted here; the
    /// driver reports it with `refused`.
    public mutating func arrived(_ peer: PeerID, from address: String) -> ConnectionRefusal? {
        guard pending[peer] == nil, !admitted.contains(peer) else { return nil }
        if pending.count >= maxPending { return .pendingHandshakes }
        let fromAddress = pendingByAddress[address] ?? 0
        if fromAddress >= maxPendingPerAddress { return .pendingPerAddress }
        pending[peer] = address
        pendingByAddress[address] = fromAddress + 1
        return nil
    }

    /// HELLO passed negotiation: nil if there is an admitted slot for it, or why not.
    public func mayAdmit() -> ConnectionRefusal? {
        admitted.count + reserved >= maxAdmitted ? .connectionLimit : nil
    }

    /// `mayAdmit` that also holds the slot it found free until `admitted` takes it or
    /// `cancelReservation` gives it back.
    public mutating func reserveSlot() -> ConnectionRefusal? {
        if let refusal = mayAdmit() { return refusal }
        reserved += 1
        return nil
    }

    /// The service refused the HELLO or sent the connection elsewhere: its slot is free.
    public mutating func cancelReservation() {
        reserved = max(0, reserved - 1)
    }

    /// The peer was admitted (HELLO_OK): it leaves the pending caps for an admitted slot,
    /// the one `reserveSlot` held for it if any.
    public mutating func admitted(_ peer: PeerID) {
        releasePending(peer)
        if admitted.insert(peer).inserted { reserved = max(0, reserved - 1) }
    }

    /// The connection closed, at whatever stage. Idempotent.
    public mutating func closed(_ peer: PeerID) {
        releasePending(peer)
        admitted.remove(peer)
    }

    private mutating func releasePending(_ peer: PeerID) {
        guard let address = pending.removeValue(forKey: peer) else { return }
        let left = (pendingByAddress[address] ?? 1) - 1
        pendingByAddress[address] = left > 0 ? left : nil
    }

    /// Counts a refusal. Returns how many refusals of this reason the log line due now
    /// should report (this one included), or nil while the reason's last line is less
    /// than `logIntervalMs` old: the driver logs one line per reason per interval.
    public mutating func refused(_ reason: ConnectionRefusal, now: Int64) -> Int? {
        refusalCounts[reason.index] += 1
        unlogged[reason.index] += 1
        return takeLogLine(reason, now: now)
    }

    /// The log lines due now for refusals held back by the rate limit: each reason with
    /// unreported refusals whose last line is at least `logIntervalMs` old. For a timer.
    public mutating func dueLogLines(now: Int64) -> [(ConnectionRefusal, Int)] {
        var lines: [(ConnectionRefusal, Int)] = []
        for reason in ConnectionRefusal.allCases where unlogged[reason.index] > 0 {
            if let count = takeLogLine(reason, now: now) { lines.append((reason, count)) }
        }
        return lines
    }

    private mutating func takeLogLine(_ reason: ConnectionRefusal, now: Int64) -> Int? {
        let index = reason.index
        if let last = lastLoggedAt[index], now - last < logIntervalMs { return nil }
        lastLoggedAt[index] = now
        defer { unlogged[index] = 0 }
        return unlogged[index]
    }
}

extension ConnectionRefusal {
    var index: Int {
        switch self {
        case .pendingHandshakes: 0
        case .pendingPerAddress: 1
        case .connectionLimit: 2
        case .handshakeTimeout: 3
        case .frameTimeout: 4
        case .outOfFileDescriptors: 5
        }
    }
}
