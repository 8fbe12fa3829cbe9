import PushEventLoop

/// Items for other destinations, gathered during one loop turn and handed over together
/// at its end: one batch per destination, so a fan-out of a thousand PUSHes in one read
/// crosses to another loop or node once rather than a thousand times. Loop-confined.
final class TurnBatches<Destination: Hashable, Item> {
    private let loop: EventLoop
    private let send: (Destination, [Item]) -> Void
    private var pending: [Destination: [Item]] = [:]
    /// The table being sent, swapped with `pending` so that neither is allocated anew
    /// each turn.
    private var sending: [Destination: [Item]] = [:]
    private var flush: LoopTimer?

    /// - Parameter send: called at the end of the turn, once per destination with items.
    init(loop: EventLoop, send: @escaping (Destination, [Item]) -> Void) {
        self.loop = loop
        self.send = send
    }

    func append(_ item: Item, for destination: Destination) {
        pending[destination, default: []].append(item)
        guard flush == nil else { return }
        // Unowned, as the timer is cancelled in deinit: a weak reference would give every
        // batcher a side table, and each retain of it (one per push sent) the slow way.
        flush = loop.schedule(after: .zero) { [unowned self] in sendPending() }
    }

    deinit { flush?.cancel() }

    /// Drops what waits, unsent.
    func cancel() {
        flush?.cancel()
        flush = nil
        pending = [:]
    }

    /// Hands over what waits now rather than at the end of the turn.
    func sendPending() {
        flush?.cancel()
        flush = nil
        swap(&pending, &sending)
        for (destination, items) in sending { send(destination, items) }
        sending.removeAll(keepingCapacity: true)
    }
}

/// `TurnBatches` for destinations numbered `0..<count`, the loops of a process: a slot per
/// destination rather than a hashed key per item. Loop-confined.
final class LoopBatches<Item> {
    private let loop: EventLoop
    private let send: (Int, [Item]) -> Void
    private var pending: [[Item]]
    /// The destinations with items waiting, in the order their first item came.
    private var waiting: [Int] = []
    private var sending: [Int] = []
    private var flush: LoopTimer?

    /// - Parameter send: called at the end of the turn, once per destination with items.
    init(loop: EventLoop, count: Int, send: @escaping (Int, [Item]) -> Void) {
        self.loop = loop
        self.send = send
        pending = Array(repeating: [], count: count)
    }

    func append(_ item: Item, for index: Int) {
        if pending[index].isEmpty { waiting.append(index) }
        pending[index].append(item)
        guard flush == nil else { return }
        // Unowned, as the timer is cancelled in deinit (see `TurnBatches`).
        flush = loop.schedule(after: .zero) { [unowned self] in sendPending() }
    }

    deinit { flush?.cancel() }

    /// Hands over what waits now rather than at the end of the turn.
    func sendPending() {
        flush?.cancel()
        flush = nil
        swap(&waiting, &sending)
        for index in sending {
            var items: [Item] = []
            swap(&items, &pending[index])
            // The batch goes to another thread with its buffer: the next starts at its
            // size rather than growing to it again by doubling.
            pending[index].reserveCapacity(items.count)
            send(index, items)
        }
        sending.removeAll(keepingCapacity: true)
    }
}
