import Foundation
import Testing
import PushClient
import PushTestSupport
import PushWire

/// A device's view of what a gateway sent it: pushes by id, MISSED, GOAWAY.
enum DeviceFrame: Hashable, CustomStringConvertible {
    case push(String)
    case missed(UInt32)
    case goaway(Status)

    var description: String {
        switch self {
        case .push(let id): "push \(id)"
        case .missed(let count): "missed \(count)"
        case .goaway(let status): "goaway \(status)"
        }
    }
}

/// Ids of the connected-only pushes `waitUntilRoutes` sends; the readers skip them.
let probePrefix = "probe-"

extension BlockingWireClient {
    /// The next PUSH (acknowledged unless told otherwise), MISSED or GOAWAY; PINGs
    /// answered, probes skipped.
    func nextFrame(timeoutMs: Int32 = 5_000, acknowledge: Bool = true) throws -> DeviceFrame {
        while true {
            let frame = try receive(timeoutMs: timeoutMs)
            switch frame.message {
            case .push(let push):
                // A connection the gateway has closed (REPLACED) may still hold frames to read.
                if acknowledge { _ = try? send(.deliveryAck(DeliveryAck(id: push.id)), correlation: frame.header.correlation) }
                let id = String(decoding: push.id, as: UTF8.self)
                if !id.hasPrefix(probePrefix) { return .push(id) }
            case .missed(let missed):
                return .missed(missed.missedCount)
            case .goaway(let goaway):
                return .goaway(goaway.status)
            case .ping:
                _ = try? send(.pong, correlation: frame.header.correlation)
            default:
                continue
            }
        }
    }

    /// The frames that come within `quietMs` of each other, probes left out.
    func drain(quietMs: Int32 = 400, acknowledge: Bool = true) -> [DeviceFrame] {
        var frames: [DeviceFrame] = []
        while let frame = try? nextFrame(timeoutMs: quietMs, acknowledge: acknowledge) { frames.append(frame) }
        return frames
    }

    /// PUSH as a provider; the PUSH_ACK.
    func push(_ target: PushTarget, id: String, ttl: UInt32 = 600, priority: UInt8 = Push.defaultPriority,
              collapse: String? = nil, timeoutMs: Int32 = 10_000) throws -> PushAck {
        let push = Push(target: target, id: Array(id.utf8), priority: priority, collapseKey: collapse, ttlSeconds: ttl)
        let reply = try request(.push(push), timeoutMs: timeoutMs)
        guard case .pushAck(let ack) = reply else { throw ServiceError.failed("PUSH \(id) refused: \(reply)") }
        return ack
    }
}

extension GatewayClusterHarness {
    /// Waits until node `index` routes a push to `device` as connected (the node heard its
    /// presence): connected-only probes until one counts as written. Probes reach no
    /// queue, and `nextFrame` skips them.
    func waitUntilRoutes(to device: String, via index: Int, timeoutSeconds: Double = 10) throws {
        let provider = try self.provider(via: index)
        var serial = 0
        let routed = waitUntil(timeoutSeconds: timeoutSeconds, pollMilliseconds: 50) {
            serial += 1
            let ack = try? provider.push(.device(device), id: "\(probePrefix)\(serial)", ttl: 0)
            return ack?.written == 1
        }
        guard routed else { throw ServiceError.failed("\(names[index]) never routed to \(device):\n\(diagnostics())") }
    }

    /// Waits until every live node routes to `device`.
    func waitUntilEveryNodeRoutes(to device: String) throws {
        for index in liveIndices { try waitUntilRoutes(to: device, via: index) }
    }
}

/// Starts a harness for a test and waits until the cluster has formed. The suites are
/// disabled without nats-server unless SECUREPUSH_REQUIRE_NATS=1, which makes this throw.
func startCluster(nodes: Int = 3, loops: Int = 1, users: [String] = ["alice"], devices: [ClusterDevice],
                  gatewayArguments: [String] = []) throws -> GatewayClusterHarness {
    let cluster = try GatewayClusterHarness(nodes: nodes, loops: loops, users: users, devices: devices, gatewayArguments: gatewayArguments)
    try cluster.waitUntilFormed()
    return cluster
}
