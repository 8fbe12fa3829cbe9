import PushEventLoop
import PushSecurity
import PushService

/// One loop's place in a gateway of several: set on its copy of the configuration.
struct GatewayShard: Sendable {
    var seat: LoopSeat<GatewayService>
    var router: GatewayLoopRouter
    /// Provider credentials accepted on any loop ([7.1-5]).
    var replays: CredentialReplayGuard

    var placement: LoopPlacement { LoopPlacement(index: seat.index, count: seat.count) }

    /// Wires a loop's server into the group before it listens.
    func join(_ server: GatewayServer, loop: EventLoop, followsRegistry: Bool) {
        let placement = self.placement
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
    }
}

extension GatewayConfiguration {
    /// A gateway on one loop, or the first of several: the one that speaks for the others.
    var speaksForProcess: Bool { shard?.seat.speaksForProcess ?? true }

    /// A loop's copy of the configuration: its place in the group.
    func seated(_ shard: GatewayShard?) -> GatewayConfiguration {
        var copy = self
        copy.shard = shard
        return copy
    }
}
