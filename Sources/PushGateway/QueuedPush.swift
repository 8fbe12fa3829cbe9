import PushWire

/// One push waiting for a device: the frame already encoded for devices (shared by every
/// device of a fan-out, so a queued copy costs a reference, not a buffer).
public struct QueuedPush: Sendable {
    /// The gateway's sequence number, which is also the PUSH frame's correlation id.
    public var sequence: UInt32
    public var frame: [UInt8]
    public var priority: UInt8
    public var collapseKey: String?
    /// Monotonic milliseconds after which it is dropped instead of delivered.
    public var expiresAtMs: Int64

    public init(sequence: UInt32, frame: [UInt8], priority: UInt8, collapseKey: String?, expiresAtMs: Int64) {
        self.sequence = sequence
        self.frame = frame
        self.priority = priority
        self.collapseKey = collapseKey
        self.expiresAtMs = expiresAtMs
    }
}

/// An offline device's queue ([4.13-5]): bounded, expired pushes dropped, a push with a
/// collapse key replacing the queued one with the same key, overflow dropping the oldest
/// and counting it as missed.
public struct DeviceQueue: Sendable {
    public private(set) var entries: [QueuedPush] = []
    public let capacity: Int

    public enum Outcome: Equatable, Sendable {
        case queued
        /// Replaced an older push with the same collapse key.
        case collapsed
        /// Queued, after dropping the oldest to make room.
        case queuedDroppingOldest
    }

    public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }

    /// Drops what expired by `nowMs`; returns how many.
    @discardableResult
    public mutating func dropExpired(nowMs: Int64) -> Int {
        let before = entries.count
        entries.removeAll { $0.expiresAtMs <= nowMs }
        return before - entries.count
    }

    public mutating func enqueue(_ push: QueuedPush, nowMs: Int64) -> Outcome {
        if let key = push.collapseKey, let index = entries.firstIndex(where: { $0.collapseKey == key }) {
            entries.remove(at: index)
            entries.append(push)
            return .collapsed
        }
        dropExpired(nowMs: nowMs)
        var outcome = Outcome.queued
        if entries.count >= capacity {
            entries.removeFirst()
            outcome = .queuedDroppingOldest
        }
        entries.append(push)
        return outcome
    }

    /// Everything queued, higher priority first and in arrival order within a priority;
    /// the queue is left empty.
    public mutating func drainForDelivery() -> [QueuedPush] {
        defer { entries = [] }
        return entries.enumerated().sorted { lhs, rhs in
            lhs.element.priority != rhs.element.priority ? lhs.element.priority > rhs.element.priority : lhs.offset < rhs.offset
        }.map(\.element)
    }
}
