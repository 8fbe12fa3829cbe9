import Testing
@testable import PushGateway

/// One heartbeat per node (CLUSTER.md, "One heartbeat per node"): the directory learns
/// every member of a node of several loops from its first member's heartbeat, and still
/// reads the per-member heartbeats of the previous build. No sockets.
@Suite("Gateway cluster: one heartbeat per node")
struct ClusterHeartbeatTests {
    static let members4 = ["g2", "g2~1", "g2~2", "g2~3"]

    static func online(_ id: String, stamp: UInt64 = 1) -> PresenceChange {
        PresenceChange(deviceID: id, online: true, stamp: stamp, user: "alice", tags: [])
    }

    @Test("a node's heartbeat naming 4 loops makes its 4 members known and alive; nobody is asked for presence")
    func nodeHeartbeatSpeaksForEveryMember() throws {
        let directory = ClusterDirectory(localNode: "g1")
        let heartbeat = NodeHeartbeat(node: "g2", boot: 7, devices: 0, wantsPresence: true, loops: 4)
        let effect = try #require(directory.heard(heartbeat, nowMs: 1_000))
        #expect(effect.arrived.sorted() == Self.members4)
        #expect(effect.announce && !effect.askForPresence)
        #expect(Set(directory.nodes.keys) == Set(Self.members4))
        #expect(directory.nodes.values.allSatisfy { $0.boot == 7 && $0.lastHeardMs == 1_000 })

        // Heartbeats of the node alone keep every member alive past the timeout.
        for second in 2...10 {
            let again = NodeHeartbeat(node: "g2", boot: 7, devices: 3, wantsPresence: false, loops: 4)
            #expect(directory.heard(again, nowMs: Int64(second) * 1_000) == ClusterDirectory.HeartbeatEffect())
            #expect(directory.removeNodes(silentSince: Int64(second) * 1_000 - 3_000) == [])
        }
        #expect(directory.nodes.count == 4)
    }

    @Test("a node's members under the boot of its heartbeat: their presence is not taken for a restart")
    func presenceUnderTheNodeBoot() throws {
        let directory = ClusterDirectory(localNode: "g1")
        _ = try #require(directory.heard(NodeHeartbeat(node: "g2", boot: 7, devices: 0, wantsPresence: false, loops: 2), nowMs: 0))
        #expect(directory.heard(from: "g2~1", boot: 7, nowMs: 10) == .known)
        directory.apply(Self.online("phone"), from: "g2~1")
        _ = directory.heard(NodeHeartbeat(node: "g2", boot: 7, devices: 0, wantsPresence: false, loops: 2), nowMs: 20)
        #expect(directory.node(of: "phone") == "g2~1")
    }

    @Test("a silent node loses every member; back under the same boot, its other members are asked for their presence")
    func silentNodeAndBack() throws {
        let directory = ClusterDirectory(localNode: "g1")
        _ = directory.heard(NodeHeartbeat(node: "g2", boot: 7, devices: 0, wantsPresence: false, loops: 4), nowMs: 0)
        directory.apply(Self.online("phone"), from: "g2~2")
        #expect(directory.removeNodes(silentSince: 3_001).sorted() == Self.members4)
        #expect(directory.node(of: "phone") == nil)

        // Loop 0 reconnected (wants presence, tells its own devices); loops 1 to 3 never
        // left NATS and would not tell theirs unasked.
        let back = try #require(directory.heard(NodeHeartbeat(node: "g2", boot: 7, devices: 0, wantsPresence: true, loops: 4), nowMs: 4_000))
        #expect(back.arrived.sorted() == Self.members4)
        #expect(back.announce && back.askForPresence)

        // Restarted (a new boot): every member starts empty and announces itself.
        #expect(directory.removeNodes(silentSince: 8_000).count == 4)
        let restarted = try #require(directory.heard(NodeHeartbeat(node: "g2", boot: 8, devices: 0, wantsPresence: true, loops: 4), nowMs: 9_000))
        #expect(restarted.announce && !restarted.askForPresence)
    }

    @Test("rolling upgrade: a previous build's heartbeat (no loops) and another member's speak for their sender alone")
    func perMemberHeartbeats() throws {
        #expect(ClusterDirectory.members(speakingFor: NodeHeartbeat(node: "old", boot: 1, devices: 0, wantsPresence: false)) == ["old"])
        #expect(ClusterDirectory.members(speakingFor: NodeHeartbeat(node: "old~3", boot: 1, devices: 0, wantsPresence: false)) == ["old~3"])
        #expect(ClusterDirectory.members(speakingFor: NodeHeartbeat(node: "g2~1", boot: 1, devices: 0, wantsPresence: true, loops: 4)) == ["g2~1"])
        #expect(ClusterDirectory.members(speakingFor: NodeHeartbeat(node: "g2", boot: 1, devices: 0, wantsPresence: false, loops: 1)) == ["g2"])

        let directory = ClusterDirectory(localNode: "g1")
        _ = directory.heard(NodeHeartbeat(node: "old", boot: 1, devices: 0, wantsPresence: false), nowMs: 0)
        _ = directory.heard(NodeHeartbeat(node: "old~1", boot: 2, devices: 0, wantsPresence: false), nowMs: 0)
        #expect(Set(directory.nodes.keys) == ["old", "old~1"])
        _ = directory.heard(NodeHeartbeat(node: "old", boot: 1, devices: 0, wantsPresence: false), nowMs: 4_000)
        #expect(directory.removeNodes(silentSince: 1_000) == ["old~1"], "each of its members is alive only as heard")
    }

    @Test("a heartbeat naming more loops than a node can run is refused whole")
    func tooManyLoops() {
        let directory = ClusterDirectory(localNode: "g1")
        let hostile = NodeHeartbeat(node: "g2", boot: 1, devices: 0, wantsPresence: false, loops: GatewayConfiguration.maxLoops + 1)
        #expect(directory.heard(hostile, nowMs: 0) == nil)
        #expect(directory.nodes.isEmpty)
        let widest = NodeHeartbeat(node: "g2", boot: 1, devices: 0, wantsPresence: false, loops: GatewayConfiguration.maxLoops)
        #expect(directory.heard(widest, nowMs: 0)?.arrived.count == GatewayConfiguration.maxLoops)
    }

    @Test("loops travels under tag 0x1B; a heartbeat without it (the previous build's) reads as 0, and writes the previous bytes")
    func loopsField() throws {
        let node = NodeHeartbeat(node: "g1", boot: 42, devices: 7, wantsPresence: true, loops: 4)
        #expect(Array(node.encoded().suffix(3)) == [0x1B, 0x01, 0x04])
        #expect(try NodeHeartbeat(decoding: node.encoded()) == node)
        let previous = NodeHeartbeat(node: "g1", boot: 42, devices: 7, wantsPresence: true)
        #expect(try NodeHeartbeat(decoding: previous.encoded()).loops == 0)
        #expect(previous.encoded() == [0x02, 0, 0, 0, 0x0d, 0x01, 0x02, 0x67, 0x31, 0x02, 0x01, 0x2a, 0x03, 0x01, 0x07, 0x04, 0x01, 0x01])
    }
}
