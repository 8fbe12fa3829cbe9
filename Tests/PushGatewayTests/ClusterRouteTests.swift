import Testing
import PushWire
@testable import PushGateway

/// A cluster node's route as values, without NATS: where each device's share of a push
/// goes (written here, `.node`, `.queue`, or not reached), as `.forward` actions that
/// `GatewayCluster` only carries out.
@Suite("Gateway cluster: the route's decisions")
struct ClusterRouteTests {
    /// A node "a" whose directory knows: "phone" (alice) connected here, "tablet" (alice)
    /// connected to node "b", "watch" (alice) and "laptop" (bob) connected to node "c",
    /// "desk" (alice) and "kiosk" (bob) connected nowhere.
    final class Node {
        let gateway: GatewayFixture
        let directory = ClusterDirectory(localNode: "a")
        var linkIsUp = true
        let phone: TestLink

        init(window: Int = 64) {
            gateway = GatewayFixture(window: window)
            phone = gateway.connect("phone", user: "alice", tags: ["news"]).1
            let devices: [(String, String, String?)] = [("phone", "alice", "a"), ("tablet", "alice", "b"), ("watch", "alice", "c"),
                                                        ("laptop", "bob", "c"), ("desk", "alice", nil), ("kiosk", "bob", nil)]
            for (deviceID, user, node) in devices {
                directory.apply(PresenceChange(deviceID: deviceID, online: node != nil, stamp: 1, user: user, tags: ["news"]),
                                from: node ?? "a")
            }
            gateway.logic.clusterView = GatewayLogic.ClusterView(directory: directory) { [unowned self] in linkIsUp }
        }

        var logic: GatewayLogic { gateway.logic }

        func push(_ target: PushTarget, user: String? = nil, once: Bool = false, ttl: UInt32 = 60) -> PushAck {
            let ack = logic.push(Push(target: target, id: [7], ttlSeconds: ttl, user: user, once: once))
            gateway.lastActions = carryOut(logic)
            return ack
        }

        /// Where the last call sent the push, apart from this node's own devices.
        var destinations: [PushDestination] { ClusterRouteTests.destinations(gateway.lastActions) }
    }

    static func destinations(_ actions: [GatewayAction]) -> [PushDestination] {
        actions.compactMap { action -> PushDestination? in
            guard case .forward(to: let destination) = action else { return nil }
            return destination
        }
    }

    static func owner(_ user: String) -> QueueOwner { QueueOwner(user: user, enrolment: 0) }
    static func target(_ deviceID: String, _ user: String) -> QueueTarget { QueueTarget(deviceID: deviceID, owner: owner(user)) }

    /// The push each cluster destination carries; nil for `.unreachable`.
    static func carried(_ destination: PushDestination) -> ClusterPush? {
        switch destination {
        case .node(_, let push, _), .queue(let push, _): push
        case .loop, .unreachable: nil
        }
    }

    @Test("[4.13-3] [4.13-4] a tag's push: written here, one forward per node holding devices, a queue write per offline device")
    func tagAcrossTheCluster() throws {
        let node = Node()
        let ack = node.push(.tag("news"))
        #expect(ack == PushAck(written: 1, queued: 0), "the counts decided here: the phone")
        #expect(node.phone.pushes.map { $0.1.id } == [[7]])
        let destinations = node.destinations
        #expect(destinations.count == 4)
        let nodes = destinations.compactMap { destination -> (String, [QueueTarget])? in
            guard case .node(let name, _, let devices) = destination else { return nil }
            return (name, devices)
        }
        #expect(nodes.count == 2)
        #expect(nodes.first { $0.0 == "b" }?.1 == [Self.target("tablet", "alice")])
        #expect(Set(nodes.first { $0.0 == "c" }?.1.map(\.deviceID) ?? []) == ["watch", "laptop"], "one forward for both of c's")
        let queues = destinations.compactMap { destination -> QueueTarget? in
            guard case .queue(_, let device) = destination else { return nil }
            return device
        }
        #expect(Set(queues.map(\.deviceID)) == ["desk", "kiosk"])
        #expect(queues.first { $0.deviceID == "kiosk" }?.owner == Self.owner("bob"), "each queue names its owner")
        let push = try #require(Self.carried(destinations[0]))
        #expect(destinations.allSatisfy { Self.carried($0) == push }, "one form of the push for every part")
        #expect(push.id.map(Array.init) == [7] && !push.connectedOnly && push.expiresAtWallMs == 1_700_000_060_000)
    }

    @Test("[4.13-11] with user, the devices elsewhere are that user's only")
    func userAcrossTheCluster() {
        let node = Node()
        _ = node.push(.tag("news"), user: "bob")
        #expect(node.phone.frames.isEmpty)
        let destinations = node.destinations
        #expect(destinations.count == 2)
        guard case .node("c", _, let devices)? = destinations.first, case .queue(_, let queued)? = destinations.last else {
            Issue.record("a forward to c, then a queue write: \(destinations)")
            return
        }
        #expect(devices == [Self.target("laptop", "bob")] && queued == Self.target("kiosk", "bob"))
    }

    @Test("[4.13-4] a push for connected devices only (TTL 0) goes to the nodes and to no queue")
    func connectedOnlyQueuesNothing() throws {
        let node = Node()
        _ = node.push(.user("alice"), ttl: 0)
        let destinations = node.destinations
        #expect(destinations.count == 2)
        #expect(destinations.allSatisfy { destination in
            guard case .node = destination else { return false }
            return true
        })
        #expect(try #require(Self.carried(destinations[0])).connectedOnly)
    }

    @Test("[4.13-13] NATS out of reach: the devices only the cluster could reach count as not reached, nothing is sent")
    func linkDownIsUnreached() {
        let node = Node()
        node.linkIsUp = false
        let ack = node.push(.tag("news"))
        #expect(ack == PushAck(written: 1, queued: 0), "the device here still gets it")
        #expect(node.destinations == [.unreachable(devices: 5)])
        _ = node.push(.device("phone"))
        #expect(node.destinations.isEmpty, "a push that needs no other server is answered as usual")
    }

    @Test("[4.13-12] once on a node: the device here is answered from what this member remembers, the parts elsewhere go again")
    func onceRepeatOnNode() {
        let node = Node()
        let first = node.push(.user("alice"), once: true)
        let firstDestinations = node.destinations
        let repeated = node.push(.user("alice"), once: true)
        #expect(first == PushAck(written: 1, queued: 0) && repeated == first)
        #expect(node.phone.frames.count == 1, "written here once")
        #expect(node.destinations.count == firstDestinations.count && node.destinations.count == 3,
                "the nodes and queue records remember their own share")
        #expect(node.gateway.counter("securepush_gateway_pushes_repeated_total") == 1)
    }

    @Test("a forwarded push for devices that left: their queues, under the owner this node knows, unless connected-only or another user's")
    func forwardedAwayGoesToQueues() {
        let node = Node()
        let frame = Push(target: nil, id: [3]).deviceFrame(correlation: 0)
        let queued = ClusterPush(deviceFrame: frame, priority: 5, collapseKey: nil, expiresAtWallMs: 1_700_000_060_000)
        _ = node.logic.deliverForwarded(ForwardedPush(push: queued, deviceIDs: ["phone", "desk", "kiosk"]))
        #expect(Self.destinations(carryOut(node.logic))
                    == [.queue(queued, Self.target("desk", "alice")), .queue(queued, Self.target("kiosk", "bob"))])
        var alices = queued
        alices.user = "alice"
        _ = node.logic.deliverForwarded(ForwardedPush(push: alices, deviceIDs: ["desk", "kiosk"]))
        #expect(Self.destinations(carryOut(node.logic))
                    == [.queue(alices, Self.target("desk", "alice"))], "[4.13-11] kiosk is bob's")
        let connectedOnly = ClusterPush(deviceFrame: frame, priority: 5, collapseKey: nil, expiresAtWallMs: 0)
        _ = node.logic.deliverForwarded(ForwardedPush(push: connectedOnly, deviceIDs: ["desk"]))
        #expect(carryOut(node.logic).isEmpty)
    }

    @Test("[4.13-13] a forward no node answered: its devices' queues; a connected-only one nowhere, not reached while NATS is away")
    func failedForward() {
        let node = Node()
        let frame = Push(target: nil, id: [3]).deviceFrame(correlation: 0)
        let queued = ClusterPush(deviceFrame: frame, priority: 5, collapseKey: nil, expiresAtWallMs: 1_700_000_060_000)
        let devices = [Self.target("tablet", "alice"), Self.target("watch", "alice")]
        node.logic.forwardFailed(queued, for: devices)
        #expect(carryOut(node.logic) == devices.map { .forward(to: .queue(queued, $0)) })
        let connectedOnly = ClusterPush(deviceFrame: frame, priority: 5, collapseKey: nil, expiresAtWallMs: 0)
        node.logic.forwardFailed(connectedOnly, for: devices)
        #expect(carryOut(node.logic).isEmpty, "connected elsewhere, and the node that holds them did not answer")
        node.linkIsUp = false
        node.logic.forwardFailed(connectedOnly, for: devices)
        #expect(carryOut(node.logic) == [.forward(to: .unreachable(devices: 2))])
    }
}
