import PushWire

/// A client's requests on one connection ([5.3]): numbered 1, 2, 3 in the order sent,
/// at most max_inflight outstanding, the rest queued; each reply matched to its request
/// by correlation id alone, and replies that match nothing discarded. `Completion` is
/// whatever the owner wants back with the reply (a closure, a table index).
public struct RequestWindow<Completion> {
    public private(set) var outstanding: [UInt32: Completion] = [:]
    public private(set) var queued: [(Message, Completion)] = []
    private var queueStart = 0
    private var nextCorrelation: UInt32 = 1
    public var maxInflight = 1
    public let maxQueued: Int

    public init(maxQueued: Int = 100_000) {
        self.maxQueued = maxQueued
    }

    public var queuedCount: Int { queued.count - queueStart }
    public var hasRoom: Bool { outstanding.count < maxInflight }

    /// A new correlation id; keepalive PINGs use the other half of the space.
    public mutating func takeCorrelation() -> UInt32 {
        defer { nextCorrelation = nextCorrelation >= 0x7FFF_FFFF ? 1 : nextCorrelation + 1 }
        return nextCorrelation
    }

    /// Numbers a request to send now; nil when max_inflight requests are outstanding.
    public mutating func begin(_ completion: Completion) -> UInt32? {
        guard hasRoom else { return nil }
        let correlation = takeCorrelation()
        outstanding[correlation] = completion
        return correlation
    }

    /// Holds a request until there is room; false when the queue is full.
    public mutating func enqueue(_ message: Message, _ completion: Completion) -> Bool {
        guard queuedCount < maxQueued else { return false }
        queued.append((message, completion))
        return true
    }

    /// The next queued request that fits the window, numbered and outstanding.
    public mutating func nextQueued() -> (Message, UInt32)? {
        guard hasRoom, queueStart < queued.count else { return nil }
        let (message, completion) = queued[queueStart]
        queueStart += 1
        if queueStart == queued.count {
            queued.removeAll(keepingCapacity: queued.count < 1024)
            queueStart = 0
        }
        guard let correlation = begin(completion) else { return nil }
        return (message, correlation)
    }

    /// The request a reply answers, removed; nil for a reply that matches none ([5.3-5]).
    public mutating func complete(_ correlation: UInt32) -> Completion? {
        outstanding.removeValue(forKey: correlation)
    }

    /// Requests above a GOAWAY's last_correlation: not carried out ([5.5-2]).
    public mutating func abandon(above lastCorrelation: UInt32) -> [Completion] {
        let above = outstanding.keys.filter { $0 > lastCorrelation }
        return above.compactMap { outstanding.removeValue(forKey: $0) }
    }

    /// Every outstanding request, for a connection that is gone (the queue stays).
    public mutating func abandonOutstanding() -> [Completion] {
        defer { outstanding = [:] }
        return Array(outstanding.values)
    }

    /// Everything, outstanding and queued, for a client that stops.
    public mutating func abandonAll() -> [Completion] {
        var all = abandonOutstanding()
        all.append(contentsOf: queued[queueStart...].map(\.1))
        queued = []
        queueStart = 0
        return all
    }

    /// A new connection numbers from 1 again, so GOAWAY's last_correlation means what it says.
    public mutating func restartNumbering() {
        nextCorrelation = 1
    }
}
