import PushEventLoop
import PushSecurity
import PushService

/// One loop's place in a gateway of several: set on its copy of the configuration.
struct GatewayShard: Sendable {
    var placement: LoopPlacement
    var router: GatewayLoopRouter
    /// The first loop's listening sockets, which the other loops accept on too; nil for
    /// the first loop, which binds them.
    var listening: SharedListenSockets?
    /// The process's connection caps, one count for every loop.
    var admission: AdmissionGate
    /// Provider credentials accepted on any loop ([7.1-5]).
    var replays: CredentialReplayGuard

    /// Wires a loop's server into the group before it listens.
    func join(_ server: GatewayServer, loop: EventLoop, followsRegistry: Bool) {
        server.logic.placement = placement
        server.loopForwarding = LoopForwarding(placement: placement, router: router, loop: loop, server: server)
        let index = placement.index
        if followsRegistry {
            server.logic.registryLoaded = { [router] in
                router.markRegistryLoaded(index)
                guard router.allRegistriesLoaded else { return }
                router.withServer(0) { first in first.logic.registryMetrics?.loaded.set(1) }
            }
        } else {
            router.markRegistryLoaded(index)
        }
        router.register(server, index: index, loop: loop)
    }
}

extension GatewayConfiguration {
    /// Loop `index`'s copy of the configuration: its place in the group.
    func shard(_ index: Int, of count: Int, router: GatewayLoopRouter, listening: SharedListenSockets?,
               admission: AdmissionGate, replays: CredentialReplayGuard) -> GatewayConfiguration {
        var copy = self
        copy.shard = GatewayShard(placement: LoopPlacement(index: index, count: count), router: router,
                                  listening: listening, admission: admission, replays: replays)
        return copy
    }
}
