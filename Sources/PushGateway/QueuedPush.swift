#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushWire

/// One push waiting for a device, or written to it and awaiting its DELIVERY_ACK: the
/// frame already encoded for devices (shared by every device of a fan-out, so a copy
/// costs a reference, not a buffer).
public struct QueuedPush: Sendable {
    /// The gateway's sequence number, which is also the PUSH frame's correlation id.
    public var sequence: UInt32
    public var frame: [UInt8]
    public var priority: UInt8
    public var collapseKey: String?
    /// Monotonic milliseconds after which it is dropped instead of delivered; `Int64.max`
    /// for a connected-only push.
    public var expiresAtMs: Int64
    /// ttl_s 0 ([4.13-5]): for the device's current connection only. It may wait behind
    /// the delivery window while that connection lasts; when it closes, the push is
    /// dropped (and counted into MISSED) instead of kept.
    public var connectedOnly: Bool
    /// From a PUSH with `once` 1 ([4.13-12]): a cluster node's queue record keeps the
    /// flag, so that a repeat of the push is not queued beside it. (In the padding after
    /// `connectedOnly`: no memory per push.)
    public var once: Bool
    /// When it was last written to a device (`Clocks.monotonicNanoseconds()`), for the
    /// delivery latency its DELIVERY_ACK closes.
    public var writtenAtNs: UInt64

    public init(sequence: UInt32, frame: [UInt8], priority: UInt8, collapseKey: String?, expiresAtMs: Int64,
                connectedOnly: Bool = false, once: Bool = false, writtenAtNs: UInt64 = 0) {
        self.sequence = sequence
        self.frame = frame
        self.priority = priority
        self.collapseKey = collapseKey
        self.expiresAtMs = expiresAtMs
        self.connectedOnly = connectedOnly
        self.once = once
        self.writtenAtNs = writtenAtNs
    }

    /// Whether `id` is the notification id this push carries: the device form of PUSH
    /// starts its body with the id field (`Push.deviceFrame`), so the frame is compared in
    /// place and no copy of the id is kept.
    public func carries(id: [UInt8]) -> Bool {
        id.withUnsafeBytes { carries(id: $0) }
    }

    /// Compared with `memcmp`: the generic `elementsEqual` over a slice costs several
    /// hundred instructions for a 16-byte id, and this runs for every DELIVERY_ACK.
    public func carries(id: UnsafeRawBufferPointer) -> Bool {
        let start = FrameHeader.size
        return frame.withUnsafeBytes { frame in
            guard frame.count >= start + 2, frame[start] == FieldTag.id.rawValue else { return false }
            // Ids are 1 to 64 bytes ([4.13]): their length is a one-byte varint.
            let length = Int(frame[start + 1])
            guard length < 0x80, length == id.count, frame.count >= start + 2 + length else { return false }
            guard length > 0, let mine = frame.baseAddress, let theirs = id.baseAddress else { return length == 0 }
            return memcmp(mine + start + 2, theirs, length) == 0
        }
    }
}

/// A device's queue ([4.13-5]): the pushes waiting for it, while it is offline or while
/// its delivery window is full. Bounded; expired pushes dropped; a push with a collapse
/// key replacing the queued one with the same key; overflow dropping the oldest (by
/// arrival) and reporting it so it counts as missed.
///
/// Kept in delivery order: first the pushes returned unacknowledged by a connection that
/// closed ([4.14-3]), in the order they were written, then the rest, higher priority
/// first and in arrival order within a priority. Taking the next push is O(1).
public struct DeviceQueue: Sendable {
    // Every device has one, so the bookkeeping is kept small.
    /// `storage[head...]` is the queue; what is before `head` was taken already.
    private var storage: [QueuedPush] = []
    /// No entry expires before this (it may be lower than the true earliest after
    /// removals, which only costs a scan that finds nothing).
    private var earliestExpiryMs = Int64.max
    /// 32 bits, like the indexes: with them the queue takes 28 bytes, and the record that
    /// holds it puts a 32-bit count in the rest of the word.
    private let storedCapacity: UInt32
    private var headIndex: UInt32 = 0
    /// How many of the first entries are returned pushes, which go before any priority.
    private var returnedCount: UInt32 = 0

    private var head: Int {
        get { Int(headIndex) }
        set { headIndex = UInt32(truncatingIfNeeded: newValue) }
    }

    private var redeliveries: Int {
        get { Int(returnedCount) }
        set { returnedCount = UInt32(truncatingIfNeeded: newValue) }
    }

    public enum Outcome: Equatable, Sendable {
        case queued
        /// Replaced an older push with the same collapse key.
        case collapsed
        /// Queued, after dropping the oldest to make room.
        case queuedDroppingOldest
    }

    public var capacity: Int { Int(storedCapacity) }

    public init(capacity: Int) {
        self.storedCapacity = UInt32(clamping: max(1, capacity))
    }

    public var isEmpty: Bool { head == storage.count }
    public var count: Int { storage.count - head }
    /// The queued pushes in the order they will be delivered.
    public var entries: ArraySlice<QueuedPush> { storage[head...] }
    /// How many of the first entries are pushes returned by a connection that closed.
    public var returnedAtFront: Int { redeliveries }
    /// The push delivered next.
    public var first: QueuedPush? { head < storage.count ? storage[head] : nil }

    /// Takes the push delivered next; the queue must not be empty.
    @discardableResult
    public mutating func removeFirst() -> QueuedPush {
        let push = storage[head]
        head += 1
        if redeliveries > 0 { redeliveries -= 1 }
        if head == storage.count {
            // A small buffer is kept for the next wait behind the window; a large one (an
            // offline backlog) is given back.
            storage.removeAll(keepingCapacity: storage.capacity <= 128)
            head = 0
            earliestExpiryMs = .max
        } else if head >= 32, head * 2 >= storage.count {
            storage.removeSubrange(0..<head)
            head = 0
        }
        return push
    }

    /// False when nothing queued can expire (empty, or connected-only pushes alone), so a
    /// caller need not read the clock.
    public var mayExpire: Bool { earliestExpiryMs != .max }

    /// Drops what expired by `nowMs`; returns how many.
    @discardableResult
    public mutating func dropExpired(nowMs: Int64) -> Int {
        guard nowMs >= earliestExpiryMs else { return 0 }
        return removeAll { $0.expiresAtMs <= nowMs }
    }

    /// Drops the connected-only pushes (the connection they were for closed); returns how many.
    @discardableResult
    public mutating func dropConnectedOnly() -> Int {
        guard storage[head...].contains(where: \.connectedOnly) else { return 0 }
        return removeAll { $0.connectedOnly }
    }

    /// `nowMs` serves only to drop expired pushes first.
    public mutating func enqueue(_ push: QueuedPush, nowMs: Int64) -> Outcome {
        if let key = push.collapseKey, let index = storage[head...].firstIndex(where: { $0.collapseKey?.isExactly(key) == true }) {
            remove(at: index)
            insertByPriority(push)
            return .collapsed
        }
        dropExpired(nowMs: nowMs)
        var outcome = Outcome.queued
        if count >= capacity {
            removeOldest()
            outcome = .queuedDroppingOldest
        }
        insertByPriority(push)
        return outcome
    }

    /// Puts pushes written on a connection that closed before they were acknowledged back
    /// at the front, in their order, ahead of everything queued. If that overflows the
    /// queue, the oldest (by arrival) are dropped; returns how many.
    public mutating func returnToFront(_ pushes: [QueuedPush]) -> Int {
        guard !pushes.isEmpty else { return 0 }
        storage.insert(contentsOf: pushes, at: head)
        redeliveries += pushes.count
        for push in pushes { earliestExpiryMs = min(earliestExpiryMs, push.expiresAtMs) }
        var dropped = 0
        while count > capacity {
            removeOldest()
            dropped += 1
        }
        return dropped
    }

    // MARK: internals

    /// After the returned pushes: behind every push of the same or a higher priority.
    /// Scans from the back, so pushes of one priority cost an append.
    private mutating func insertByPriority(_ push: QueuedPush) {
        let floor = head + redeliveries
        var index = storage.count
        while index > floor, storage[index - 1].priority < push.priority { index -= 1 }
        storage.insert(push, at: index)
        earliestExpiryMs = min(earliestExpiryMs, push.expiresAtMs)
    }

    private mutating func remove(at index: Int) {
        storage.remove(at: index)
        if index < head + redeliveries { redeliveries -= 1 }
        if head == storage.count {
            storage.removeAll(keepingCapacity: storage.capacity <= 128)
            head = 0
            earliestExpiryMs = .max
        }
    }

    /// The push that arrived first (lowest sequence, modulo wrap-around).
    private mutating func removeOldest() {
        guard !isEmpty else { return }
        var oldest = head
        for index in (head + 1)..<storage.count where sequenceOrder(storage[index].sequence, storage[oldest].sequence) {
            oldest = index
        }
        remove(at: oldest)
    }

    private mutating func removeAll(where shouldRemove: (QueuedPush) -> Bool) -> Int {
        if head > 0 {
            storage.removeSubrange(0..<head)
            head = 0
        }
        let before = storage.count
        var returnedKept = 0
        for index in 0..<redeliveries where !shouldRemove(storage[index]) { returnedKept += 1 }
        storage.removeAll(where: shouldRemove)
        redeliveries = returnedKept
        earliestExpiryMs = .max
        for push in storage { earliestExpiryMs = min(earliestExpiryMs, push.expiresAtMs) }
        if storage.isEmpty { storage.removeAll(keepingCapacity: storage.capacity <= 128) }
        return before - storage.count
    }
}

/// The pushes written on a device's connection and awaiting DELIVERY_ACK, in the order
/// written. Devices acknowledge mostly in order, so the match is usually the first entry
/// and taking it is O(1) (no shifting of the rest).
public struct InFlightPushes: Sendable {
    /// `storage[head...]` are in flight; what is before `head` was acknowledged.
    private var storage: [QueuedPush] = []
    private var headIndex: UInt32 = 0
    /// The bytes of the frames in flight, which the delivery window bounds too ([4.14-5]).
    /// (Beside `headIndex`, it fits in padding: no memory per device.)
    public private(set) var byteCount: UInt32 = 0

    private var head: Int {
        get { Int(headIndex) }
        set { headIndex = UInt32(truncatingIfNeeded: newValue) }
    }

    public init() {}

    public var count: Int { storage.count - head }
    public var isEmpty: Bool { head == storage.count }
    /// In the order written.
    public var pushes: ArraySlice<QueuedPush> { storage[head...] }

    public mutating func append(_ push: QueuedPush) {
        byteCount &+= UInt32(truncatingIfNeeded: push.frame.count)
        storage.append(push)
    }

    /// The position of the push written with correlation `sequence`.
    public func index(of sequence: UInt32) -> Int? {
        var index = head
        while index < storage.count {
            if storage[index].sequence == sequence { return index }
            index += 1
        }
        return nil
    }

    public subscript(index: Int) -> QueuedPush { storage[index] }

    /// What a DELIVERY_ACK did to the pushes in flight.
    public enum Acknowledgement: Equatable, Sendable {
        /// No push in flight was written with that correlation id.
        case unknown
        /// One was, but it carries another id; it stays in flight.
        case mismatched
        /// Taken out of flight; it was written at `writtenAtNs`.
        case acknowledged(writtenAtNs: UInt64)
    }

    /// Takes the push written with correlation `sequence` out of flight if it carries
    /// `id`. Compared in place: no copy of the push (its frame and collapse key would be
    /// retained and released) for the ack every delivery gets.
    public mutating func acknowledge(_ sequence: UInt32, id: UnsafeRawBufferPointer) -> Acknowledgement {
        guard let index = index(of: sequence) else { return .unknown }
        guard storage[index].carries(id: id) else { return .mismatched }
        let writtenAtNs = storage[index].writtenAtNs
        remove(at: index)
        return .acknowledged(writtenAtNs: writtenAtNs)
    }

    public mutating func remove(at index: Int) {
        byteCount &-= UInt32(truncatingIfNeeded: storage[index].frame.count)
        if index == storage.count - 1 {
            // The common case, one push in flight: a plain `removeLast`, far cheaper than
            // emptying the array through `removeAll(keepingCapacity:)`, and the push's
            // frame is released now rather than when the array next empties.
            storage.removeLast()
        } else if index == head {
            head += 1
        } else {
            storage.remove(at: index)
        }
        if head == storage.count {
            if head > 0 { storage.removeAll(keepingCapacity: true) }
            head = 0
        } else if head >= 16, head * 2 >= storage.count {
            storage.removeSubrange(0..<head)
            head = 0
        }
    }

    /// Everything in flight, in the order written; leaves it empty.
    public mutating func removeAll() -> [QueuedPush] {
        let all = Array(storage[head...])
        storage = []
        head = 0
        byteCount = 0
        return all
    }
}
