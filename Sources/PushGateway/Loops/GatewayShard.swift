import PushEventLoop
import PushService

/// One loop's place in a gateway of several: set on its copy of the configuration.
struct GatewayShard: Sendable {
    var placement: LoopPlacement
    var router: GatewayLoopRouter
    /// The first loop's listening sockets, which the other loops accept on too; nil for
    /// the first loop, which binds them.
    var listening: SharedListenSockets?

    /// Wires a loop's server into the group before it listens.
    func join(_ server: GatewayServer, loop: EventLoop, followsRegistry: Bool) {
        server.logic.placement = placement
        server.loopForwarding = LoopForwarding(placement: placement, router: router, loop: loop, server: server)
        let index = placement.index
        if followsRegistry {
            server.logic.registryLoaded = { [router] in router.markRegistryLoaded(index) }
        } else {
            router.markRegistryLoaded(index)
        }
        router.register(server, index: index, loop: loop)
    }
}

extension GatewayConfiguration {
    /// Loop `index`'s copy: its place, and an even share of the process's connection
    /// limits (devices spread over the loops by a hash of their ids).
    func shard(_ index: Int, of count: Int, router: GatewayLoopRouter, listening: SharedListenSockets?) -> GatewayConfiguration {
        var copy = self
        copy.shard = GatewayShard(placement: LoopPlacement(index: index, count: count), router: router, listening: listening)
        func share(_ total: Int) -> Int { max(1, (total + count - 1) / count) }
        copy.limits.maxConnections = share(limits.maxConnections)
        copy.limits.maxPendingHandshakes = share(limits.maxPendingHandshakes)
        // Not shared out: one address's burst lands on whichever loop accepts first.
        copy.limits.maxPendingPerAddress = min(copy.limits.maxPendingHandshakes, limits.maxPendingPerAddress)
        return copy
    }
}
