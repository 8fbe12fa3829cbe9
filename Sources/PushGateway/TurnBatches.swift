import PushEventLoop

/// Items for other destinations, gathered during one loop turn and handed over together
/// at its end: one batch per destination, so a fan-out of a thousand PUSHes in one read
/// crosses to another loop or node once rather than a thousand times. Loop-confined.
final class TurnBatches<Destination: Hashable, Item> {
    private let loop: EventLoop
    private let send: (Destination, [Item]) -> Void
    private var pending: [Destination: [Item]] = [:]
    private var flush: LoopTimer?

    /// - Parameter send: called at the end of the turn, once per destination with items.
    init(loop: EventLoop, send: @escaping (Destination, [Item]) -> Void) {
        self.loop = loop
        self.send = send
    }

    func append(_ item: Item, for destination: Destination) {
        pending[destination, default: []].append(item)
        guard flush == nil else { return }
        flush = loop.schedule(after: .zero) { [weak self] in self?.sendPending() }
    }

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
        let batches = pending
        pending = [:]
        for (destination, items) in batches { send(destination, items) }
    }
}
