import PushEventLoop
import Synchronization

/// Spreads a store's connections evenly over its loops. The kernel hands a new connection
/// to whichever loop wakes first, which on an idle machine is often the same one: four
/// connections could all land on one loop and leave the others idle. So at HELLO each
/// connection is given the next loop in turn, and moves there if another loop accepted
/// it (`Connection.handOff`), once, before any request. Any thread; every server it hands
/// out is used on its own loop only.
final class StoreLoopBalancer: Sendable {
    let count: Int
    private let next = Atomic<Int>(0)
    private let servers: Mutex<[LoopBound<StoreServer>?]>

    init(count: Int) {
        self.count = count
        servers = Mutex(Array(repeating: nil, count: count))
    }

    /// The loop the next connection belongs on.
    func pick() -> Int {
        let turn = next.add(1, ordering: .relaxed).oldValue
        return turn % count
    }

    /// On the server's own loop thread, once it is ready to adopt connections.
    func register(_ server: StoreServer, index: Int, loop: EventLoop) {
        let bound = LoopBound(server, loop: loop)
        servers.withLock { $0[index] = bound }
    }

    /// That loop has stopped and adopts no more connections.
    func unregister(index: Int) {
        servers.withLock { $0[index] = nil }
    }

    /// Runs `work` with loop `index`'s server on that loop's thread, during a later turn.
    /// False (and `work` dropped) when that loop is not running.
    @discardableResult
    func withServer(_ index: Int, _ work: @escaping @Sendable (StoreServer) -> Void) -> Bool {
        guard let bound = servers.withLock({ $0[index] }) else { return false }
        return bound.handle.execute { work(bound.value) }
    }
}
