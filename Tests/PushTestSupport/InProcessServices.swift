import Logging
import PushEventLoop
import PushGateway
import PushService
import PushStore
import PushWire

/// A payload store running in this process, on its own loop thread, on a free port of
/// 127.0.0.1, over a temporary deployment's database. Stopped (drained) on `stop()` or
/// deinit.
public final class InProcessStore: ReachableService {
    public let deployment: TemporaryDeployment
    public let host = "127.0.0.1"
    public let port: Int
    private let hosted: HostedService<StoreService>

    /// - Parameter configure: changes to the configuration made from the deployment (port 0,
    ///   silent logs) before the store starts.
    public init(_ deployment: TemporaryDeployment, configure: (inout StoreConfiguration) -> Void = { _ in }) throws {
        self.deployment = deployment
        var configuration = StoreConfiguration(deployment: deployment.deployment, host: host, port: 0)
        configuration.logger = .silent("securepush.store")
        configure(&configuration)
        let ready = configuration
        hosted = try HostedService(name: "test-store") { loop in try StoreService.start(ready, on: loop) }
        port = hosted.onLoop { $0.port } ?? 0
    }

    deinit { stop() }

    /// Drains the store (GOAWAY, outstanding commits answered, writer thread ended) and
    /// joins its loop thread. Idempotent.
    public func stop() {
        hosted.stop { service, drained in service.drain(then: drained) }
    }

    /// Runs `body` on the store's loop and waits for it; nil once stopped.
    public func onLoop<T>(_ body: @escaping @Sendable (StoreService) -> T) -> T? { hosted.onLoop(body) }
}

/// A push gateway running in this process, on its own loop thread, on a free port of
/// 127.0.0.1. Stopped (drained) on `stop()` or deinit.
public final class InProcessGateway: ReachableService {
    public let deployment: TemporaryDeployment
    public let host = "127.0.0.1"
    public let port: Int
    private let hosted: HostedService<GatewayService>

    /// - Parameter configure: changes to the configuration made from the deployment (port 0,
    ///   silent logs, no metrics) before the gateway starts.
    public init(_ deployment: TemporaryDeployment, configure: (inout GatewayConfiguration) -> Void = { _ in }) throws {
        self.deployment = deployment
        var configuration = GatewayConfiguration(deployment: deployment.deployment, host: host, port: 0)
        configuration.logger = .silent("securepush.gateway")
        configure(&configuration)
        let ready = configuration
        hosted = try HostedService(name: "test-gateway") { loop in try GatewayService.start(ready, on: loop) }
        port = hosted.onLoop { $0.port } ?? 0
    }

    deinit { stop() }

    /// Drains the gateway (GOAWAY to every connection) and joins its loop thread. Idempotent.
    public func stop() {
        hosted.stop { service, drained in service.drain(then: drained) }
    }

    /// Runs `body` on the gateway's loop and waits for it; nil once stopped.
    public func onLoop<T>(_ body: @escaping @Sendable (GatewayService) -> T) -> T? { hosted.onLoop(body) }

    /// PUSH requests it accepted from providers so far.
    public var pushesAccepted: UInt64 {
        onLoop { $0.logic.metrics.pushesAccepted.value } ?? 0
    }

    /// Whether the gateway has seen `device` connect and is holding a link to it now.
    public func isOnline(_ device: String) -> Bool {
        onLoop { $0.logic.devices[ExactName(device)]?.isOnline ?? false } ?? false
    }

    /// Whether the gateway knows `device` and has seen its connection close.
    public func isOffline(_ device: String) -> Bool {
        onLoop { $0.logic.devices[ExactName(device)].map { !$0.isOnline } ?? false } ?? false
    }
}

/// A service on several loop threads in this process: its first loop on a thread of its
/// own, the others on theirs, all on one free port of 127.0.0.1.
public final class InProcessLoops<Member: LoopGroupMember>: ReachableService {
    public let deployment: TemporaryDeployment
    public let host = "127.0.0.1"
    public let port: Int
    private let hosted: HostedService<ServiceLoopGroup<Member>>

    init(_ deployment: TemporaryDeployment, name: String, start: @escaping @Sendable (EventLoop) throws -> ServiceLoopGroup<Member>) throws {
        self.deployment = deployment
        hosted = try HostedService(name: name, start: start)
        port = hosted.onLoop { $0.port } ?? 0
    }

    deinit { stop() }

    /// Drains every loop (a store's shared writer commits what it holds and ends), then
    /// ends the other loops' threads and joins the first's. Idempotent.
    public func stop() {
        hosted.stop { loops, drained in
            loops.drain {
                loops.shutdown()
                drained()
            }
        }
    }
}

public typealias InProcessGatewayLoops = InProcessLoops<GatewayService>
public typealias InProcessStoreLoops = InProcessLoops<StoreService>

extension InProcessLoops where Member == GatewayService {
    public convenience init(_ deployment: TemporaryDeployment, loops: Int, configure: (inout GatewayConfiguration) -> Void = { _ in }) throws {
        var configuration = GatewayConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        configuration.logger = .silent("securepush.gateway")
        configuration.loops = loops
        configure(&configuration)
        let ready = configuration
        try self.init(deployment, name: "test-gateway") { loop in try GatewayLoops.start(ready, on: loop) }
    }
}

extension InProcessLoops where Member == StoreService {
    public convenience init(_ deployment: TemporaryDeployment, loops: Int, configure: (inout StoreConfiguration) -> Void = { _ in }) throws {
        var configuration = StoreConfiguration(deployment: deployment.deployment, host: "127.0.0.1", port: 0)
        configuration.logger = .silent("securepush.store")
        configuration.loops = loops
        configure(&configuration)
        let ready = configuration
        try self.init(deployment, name: "test-store") { loop in try StoreLoops.start(ready, on: loop) }
    }
}
