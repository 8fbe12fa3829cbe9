import Testing
import PushSecurity
import PushWire
@testable import PushGateway

/// The parts of the cluster with no I/O: the presence directory and the rules a JetStream
/// queue record follows (the messages' layout is in `ClusterCodecTests`).
@Suite("Gateway cluster: directory and queue records")
struct ClusterUnitTests {
    static let wallNow: UInt64 = 1_700_000_000_000
    static let alice = QueueOwner(user: "alice", enrolment: 0)

    static func push(_ id: UInt8, priority: UInt8 = 5, collapse: String? = nil, expiresIn ms: UInt64 = 60_000) -> ClusterPush {
        let frame = Push(target: nil, id: [id], priority: priority, collapseKey: collapse).deviceFrame(correlation: 0)
        return ClusterPush(deviceFrame: frame, priority: priority, collapseKey: collapse, expiresAtWallMs: wallNow + ms)
    }

    static func ids(_ record: QueueRecord) -> [UInt8] {
        record.entries.compactMap { $0.push.frameBody.count > 2 ? $0.push.frameBody[2] : nil }
    }

    @Test("device ids become distinct subject tokens with no dot, wildcard or space")
    func subjectTokens() {
        #expect(ClusterSubjects.token("phone-1_A") == "phone-1_A")
        #expect(ClusterSubjects.token("a.b") == "a%2Eb")
        #expect(ClusterSubjects.token("a%2Eb") == "a%252Eb", "the escape character is escaped too")
        #expect(ClusterSubjects.token("*>") == "%2A%3E")
        #expect(ClusterSubjects.token("é") == "%C3%A9")
        #expect(ClusterSubjects().queue(of: "a b") == "securepush.queue.a%20b")
        #expect(ClusterSubjects(prefix: "sp.test").streamName == "SP_TEST_QUEUES")
        #expect(ClusterSubjects.isValidNodeName("gateway-1"))
        #expect(!ClusterSubjects.isValidNodeName("a.b") && !ClusterSubjects.isValidNodeName(""))
    }

    @Test("[5.5-3] the later connection of a device stands; the node holding the earlier one replaces it")
    func directoryReplacement() {
        let directory = ClusterDirectory(localNode: "a")
        let local = PresenceChange(deviceID: "phone", online: true, stamp: 100, user: "alice", tags: ["news"])
        #expect(directory.apply(local, from: "a") == .none)
        #expect(directory.node(of: "phone") == "a")
        // An older connection elsewhere does not take it.
        #expect(directory.apply(PresenceChange(deviceID: "phone", online: true, stamp: 99, user: "alice", tags: []), from: "b") == .none)
        #expect(directory.node(of: "phone") == "a")
        // A later one does, and this node must close its own.
        #expect(directory.apply(PresenceChange(deviceID: "phone", online: true, stamp: 101, user: "alice", tags: []), from: "b")
            == .replaceLocal("phone"))
        #expect(directory.node(of: "phone") == "b")
        // The old node's "left" for its own connection does not unseat the new one.
        directory.apply(PresenceChange(deviceID: "phone", online: false, stamp: 100, user: "alice", tags: []), from: "a")
        #expect(directory.node(of: "phone") == "b")
        #expect(directory.stampForNewConnection(of: "phone", wallMs: 5) == 102, "a skewed clock never makes a new connection older")
        directory.apply(PresenceChange(deviceID: "phone", online: false, stamp: 101, user: "alice", tags: []), from: "b")
        #expect(directory.node(of: "phone") == nil)
    }

    @Test("a silent node's devices are offline; a node back under a new boot holds none of its old ones")
    func directoryNodes() {
        let directory = ClusterDirectory(localNode: "a")
        #expect(directory.heard(from: "b", boot: 1, nowMs: 0) == .new)
        #expect(directory.heard(from: "b", boot: 1, nowMs: 1_000) == .known)
        directory.apply(PresenceChange(deviceID: "phone", online: true, stamp: 1, user: "alice", tags: ["t"]), from: "b")
        #expect(directory.heard(from: "b", boot: 2, nowMs: 1_500) == .new)
        #expect(directory.node(of: "phone") == nil)
        directory.apply(PresenceChange(deviceID: "phone", online: true, stamp: 2, user: "alice", tags: ["t"]), from: "b")
        #expect(directory.removeNodes(silentSince: 1_000) == [])
        #expect(directory.removeNodes(silentSince: 2_000) == ["b"])
        #expect(directory.node(of: "phone") == nil)
        var seen: [String] = []
        directory.forEachDevice(matching: .tag("t")) { seen.append($0) }
        #expect(seen == ["phone"], "without a registry, a device seen once still matches its targets (SPEC 1.1)")
    }

    @Test("silence a node could not hear (its own link down) is not the others': after it, each gets a full timeout again")
    func heardFromAll() {
        let directory = ClusterDirectory(localNode: "a")
        directory.heard(from: "b", boot: 1, nowMs: 1_000)
        directory.heard(from: "c", boot: 1, nowMs: 9_000)
        directory.apply(PresenceChange(deviceID: "phone", online: true, stamp: 1, user: "alice", tags: []), from: "b")
        directory.heardFromAll(nowMs: 8_000)
        #expect(directory.nodes["b"]?.lastHeardMs == 8_000)
        #expect(directory.nodes["c"]?.lastHeardMs == 9_000, "a later hearing stays")
        #expect(directory.removeNodes(silentSince: 7_000) == [])
        #expect(directory.node(of: "phone") == "b", "b keeps its devices")
        #expect(directory.removeNodes(silentSince: 8_500) == ["b"])
    }

    @Test("a queue written for a device no node was known to hold: the node it turns out connected to is told to take it, unless it connected after the write")
    func unplacedQueues() {
        var unplaced = UnplacedQueues()
        unplaced.wrote("phone", atWallMs: 100_000)
        unplaced.wrote("tablet", atWallMs: 100_000)
        unplaced.wrote("watch", atWallMs: 100_000)
        let phoneFirst = unplaced.holderMustTake("phone", connectedSince: 40_000)
        let phoneAgain = unplaced.holderMustTake("phone", connectedSince: 40_000)
        let tablet = unplaced.holderMustTake("tablet", connectedSince: 100_000 + UnplacedQueues.clockSkewMs)
        let watch = unplaced.holderMustTake("watch", connectedSince: 100_001 + UnplacedQueues.clockSkewMs)
        #expect(phoneFirst, "connected before the write: its own take came first")
        #expect(!phoneAgain, "told once")
        #expect(tablet, "within the clock skew")
        #expect(!watch, "connected after the write: it took the queue when it connected")
        #expect(unplaced.isEmpty)
        unplaced.wrote("phone", atWallMs: 1)
        unplaced.forget("phone")
        let forgotten = unplaced.holderMustTake("phone", connectedSince: 0)
        #expect(!forgotten, "connected here since: taken here")
    }

    @Test("[4.13-5] [4.15-3] a record queues like a device's queue: collapse, priority, TTL and overflow into MISSED")
    func recordRules() {
        let now = Self.wallNow
        var record = QueueRecord(user: "alice")
        record = record.appending(Self.push(1, expiresIn: 1_000), for: Self.alice, capacity: 3, nowWallMs: now).0
        record = record.appending(Self.push(2, collapse: "score"), for: Self.alice, capacity: 3, nowWallMs: now).0
        let (collapsed, outcome) = record.appending(Self.push(3, collapse: "score"), for: Self.alice, capacity: 3, nowWallMs: now)
        #expect(outcome == .collapsed)
        record = collapsed
        #expect(Self.ids(record) == [1, 3])
        record = record.appending(Self.push(4, priority: 9), for: Self.alice, capacity: 3, nowWallMs: now).0
        #expect(Self.ids(record) == [4, 1, 3], "higher priority first")
        let (full, overflow) = record.appending(Self.push(5), for: Self.alice, capacity: 3, nowWallMs: now)
        #expect(overflow == .queuedDroppingOldest)
        #expect(Self.ids(full) == [4, 3, 5] && full.missed == 1, "the oldest (push 1) dropped and counted")
        let later = full.appending(Self.push(6), for: Self.alice, capacity: 3, nowWallMs: now + 2_000).0
        #expect(Self.ids(later) == [4, 5, 6] && later.missed == 2, "push 3 arrived before 4 and 5: it is the oldest")
        let expired = record.expiring(nowWallMs: now + 1_500, capacity: 3)
        #expect(Self.ids(expired) == [4, 3] && expired.missed == 1, "push 1 outlived its TTL")
        let otherUser = record.appending(Self.push(7), for: QueueOwner(user: "bob", enrolment: 0), capacity: 3, nowWallMs: now)
        #expect(Self.ids(otherUser.0) == [7] && otherUser.0.user == "bob", "a device enrolled again keeps none of the old user's pushes")
    }

    @Test("[4.14-3] a handed-over queue goes first: its unacknowledged pushes ahead of everything, in their order")
    func recordMerge() {
        let now = Self.wallNow
        let queued = QueueRecord(user: "alice").appending(Self.push(9, priority: 9), for: Self.alice, capacity: 10, nowWallMs: now).0
        let handed = QueueRecord(user: "alice", missed: 1, entries: [
            QueueRecord.Entry(push: Self.push(1), returned: true, rank: 1),
            QueueRecord.Entry(push: Self.push(2), returned: true, rank: 2),
            QueueRecord.Entry(push: Self.push(3), returned: false, rank: 3),
        ])
        let merged = queued.merging(older: handed, capacity: 10, nowWallMs: now)
        #expect(Self.ids(merged) == [1, 2, 9, 3])
        #expect(merged.missed == 1)
        #expect(merged.entries.prefix(2).allSatisfy { $0.returned })
        let small = queued.merging(older: handed, capacity: 2, nowWallMs: now)
        #expect(small.entries.count == 2 && small.missed == 3, "overflow on merge drops the oldest and counts them")
    }
}
