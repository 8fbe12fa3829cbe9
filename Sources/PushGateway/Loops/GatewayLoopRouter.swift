import PushEventLoop
import PushWire
import Synchronization

/// What the loops of one gateway process share: the way to reach each other's server.
/// Any thread; every server it hands out is used on its own loop only.
final class GatewayLoopRouter: Sendable {
    let count: Int
    private let servers: Mutex<[LoopBound<GatewayServer>?]>
    /// Loops whose logic has loaded the device registry (or follows none).
    private let registryLoaded = Mutex<Set<Int>>([])

    init(count: Int) {
        self.count = count
        servers = Mutex(Array(repeating: nil, count: count))
    }

    /// On the server's own loop thread, once it is ready to take work from the others.
    func register(_ server: GatewayServer, index: Int, loop: EventLoop) {
        let bound = LoopBound(server, loop: loop)
        servers.withLock { $0[index] = bound }
    }

    /// On that loop's thread: it has stopped and takes no more work.
    func unregister(index: Int) {
        servers.withLock { $0[index] = nil }
    }

    /// Runs `work` with loop `index`'s server on that loop's thread, during a later turn.
    /// False (and `work` dropped) when that loop is not running.
    @discardableResult
    func withServer(_ index: Int, _ work: @escaping @Sendable (GatewayServer) -> Void) -> Bool {
        guard let bound = servers.withLock({ $0[index] }) else { return false }
        return bound.handle.execute { work(bound.value) }
    }

    func markRegistryLoaded(_ index: Int) {
        registryLoaded.withLock { _ = $0.insert(index) }
    }

    var allRegistriesLoaded: Bool { registryLoaded.withLock { $0.count == count } }
}

/// A PUSH sent to another loop for the devices whose home it is, and its answer.
struct LoopPush: Sendable {
    var push: Push
    var token: UInt64
}

struct LoopPushAck: Sendable {
    var token: UInt64
    var ack: PushAck
}
