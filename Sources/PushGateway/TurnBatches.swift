import PushEventLoop

/// Items for other destinations, gathered during one loop turn and handed over together
/// at its end: one batch per destination, so a fan-out of a thousand PUSHes in one read
/// crosses to another loop or node once rather than a thousand times. Loop-confined.
final class TurnBatches<Destination: Hashable, Item> {
    private let loop: EventLoop
    private let send: (Destination, [Item]) -> Void
    @exclusivity(unchecked) private var pending: [Destination: [Item]] = [:]
    /// The table being sent, swapped with `pending` so that neither is allocated anew
    /// each turn.
    @exclusivity(unchecked) private var sending: [Destination: [Item]] = [:]
    @exclusivity(unchecked) private var flush: LoopTimer?

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
