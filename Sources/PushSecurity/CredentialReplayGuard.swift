import Synchronization

/// The HELLO credentials a server has accepted within their window, so that each is
/// accepted once ([7.1-5]). A credential is remembered until its timestamp is a window
/// behind the server's clock; past then it is refused as expired anyway.
///
/// Bounded: when `capacity` credentials are remembered and none has expired, a new one is
/// refused (`.full`) rather than letting memory grow or forgetting one early.
public final class CredentialReplayGuard: Sendable {
    public enum Outcome: Equatable, Sendable {
        case fresh
        case replayed
        case full
    }

    public let capacity: Int
    private let windowMs: UInt64
    /// Locked: a gateway's loops share one guard, so a credential accepted on one loop is
    /// refused on every other. One lock per HELLO that passed its MAC check, never per frame.
    private let memory: Mutex<Memory>

    public init(capacity: Int = 100_000, windowMs: UInt64 = HelloCredential.windowMs) {
        self.capacity = capacity
        self.windowMs = windowMs
        memory = Mutex(Memory())
    }

    public var count: Int { memory.withLock { $0.forgetAt.count } }

    public func record(_ stamp: CredentialStamp, nowMs: UInt64) -> Outcome {
        memory.withLock { $0.record(stamp, nowMs: nowMs, capacity: capacity, windowMs: windowMs) }
    }
}

private struct Memory {
    var forgetAt: [CredentialStamp: UInt64] = [:]
    /// In order of arrival, which is near enough the order of expiry for a lazy sweep:
    /// timestamps differ from arrival by at most the window.
    var arrivals: [(stamp: CredentialStamp, forgetAt: UInt64)] = []
    var head = 0

    mutating func record(_ stamp: CredentialStamp, nowMs: UInt64, capacity: Int, windowMs: UInt64) -> CredentialReplayGuard.Outcome {
        if forgetAt[stamp] != nil { return .replayed }
        if forgetAt.count >= capacity { sweep(nowMs: nowMs, all: true) }
        else { sweep(nowMs: nowMs, all: false) }
        guard forgetAt.count < capacity else { return .full }
        // verify accepts up to issuedAt + window inclusive: remember one millisecond past it.
        let until = stamp.issuedAt + windowMs + 1
        forgetAt[stamp] = until
        arrivals.append((stamp, until))
        return .fresh
    }

    /// Drops what has expired from the front of the arrival order, or, when `all`, from
    /// everywhere (only when the guard is full, so the cost is paid rarely).
    private mutating func sweep(nowMs: UInt64, all: Bool) {
        if all {
            forgetAt = forgetAt.filter { $0.value > nowMs }
            arrivals = arrivals[head...].filter { $0.forgetAt > nowMs }
            head = 0
            return
        }
        while head < arrivals.count, arrivals[head].forgetAt <= nowMs {
            forgetAt[arrivals[head].stamp] = nil
            head += 1
        }
        if head > 1024, head * 2 > arrivals.count {
            arrivals.removeFirst(head)
            head = 0
        }
    }
}
