import PushEventLoop
import PushService
import PushWire
import Synchronization

/// How the loops of one gateway process reach each other's server, and which of them have
/// loaded the device registry. Any thread; every server it hands out is used on its own
/// loop only.
final class GatewayLoopRouter: Sendable {
    let members: LoopMembers<GatewayService>
    /// Loops whose logic has loaded the device registry (or follows none).
    private let registryLoaded = Mutex<Set<Int>>([])

    init(members: LoopMembers<GatewayService>) {
        self.members = members
    }

    var count: Int { members.count }

    /// Runs `work` with loop `index`'s server on that loop's thread, during a later turn.
    /// False (and `work` dropped) when that loop is not running.
    @discardableResult
    func withServer(_ index: Int, _ work: @escaping @Sendable (GatewayServer) -> Void) -> Bool {
        members.withMember(index) { work($0.server) }
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
    /// See `PushTally.unreached`.
    var unreached: UInt32 = 0
}
