import PushEventLoop
import PushSecurity
import PushService

/// A push gateway on one or more loop threads (`--loops`), as a `ServiceLoopGroup`: each
/// loop serves the devices whose home it is (see `LoopPlacement`); a connection accepted
/// elsewhere moves home after its HELLO. With one loop it is exactly a `GatewayService`.
public typealias GatewayLoops = ServiceLoopGroup<GatewayService>

extension ServiceLoopGroup where Member == GatewayService {
    public static func start(_ configuration: GatewayConfiguration, on loop: EventLoop) throws(GatewayServiceError) -> GatewayLoops {
        try configuration.validate()
        let configuration = configuration.withClusterBoot()
        let members = LoopMembers<GatewayService>(count: configuration.effectiveLoopCount)
        let router = GatewayLoopRouter(members: members)
        let replays = CredentialReplayGuard()
        return try start(
            members, name: "gateway", admission: AdmissionGate(limits: configuration.limits), on: loop,
            member: { seat, loop throws(GatewayServiceError) in
                let shard = seat.map { GatewayShard(seat: $0, router: router, replays: replays) }
                return try GatewayService.start(configuration.seated(shard), on: loop)
            },
            // Every loop's registry loaded, known the moment it is.
            processReadiness: { _ in
                router.allRegistriesLoaded ? .ready : .notReady("loading the device registry from the store")
            },
            cannotStart: { .invalidConfiguration($0) },
            cannotShare: { .cannotListen(host: configuration.host, port: $1, $0) })
    }
}

extension GatewayConfiguration {
    /// The node's boot for every loop of this start (`ClusterConfiguration.boot`).
    fileprivate func withClusterBoot() -> GatewayConfiguration {
        var copy = self
        copy.cluster?.boot = UInt64.random(in: 1...UInt64.max)
        return copy
    }
}
