import Testing
@testable import PushGateway

/// Presence by bucket (CLUSTER.md, "Presence by bucket"): a member subscribes to the
/// buckets that can hold devices whose home it is, for any loop count. No sockets.
@Suite("Gateway cluster: presence by bucket")
struct ClusterPresenceBucketTests {
    static let subjects = ClusterSubjects()
    static let ids = (0..<2_000).map { "device-\($0)" }

    @Test("every device's bucket is among the subjects of its home member, whatever the node's loop count",
          arguments: [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32, 48, 64, 100, 128, 256])
    func homeHearsItsDevices(loops: Int) {
        let subscribed = (0..<loops).map { Set(Self.subjects.presenceSubjects(for: LoopPlacement(index: $0, count: loops))) }
        for id in Self.ids {
            let home = LoopPlacement.home(of: id, count: loops)
            let subject = Self.subjects.presence(bucket: ClusterSubjects.presenceBucket(of: id))
            #expect(subscribed[home].contains(subject) || subscribed[home].contains(Self.subjects.presenceWildcard), "\(id) on loop \(home) of \(loops)")
        }
        #expect(subscribed.allSatisfy { $0.contains("securepush.presence") }, "the previous build's subject is read by every member")
    }

    @Test("a member hears only its share of buckets when its node's loop count divides 64 or is a multiple of it; else all")
    func shares() {
        func buckets(_ index: Int, of count: Int) -> [String] {
            Self.subjects.presenceSubjects(for: LoopPlacement(index: index, count: count)).filter { $0 != "securepush.presence" }
        }
        #expect(buckets(1, of: 4).count == 16)
        #expect(buckets(1, of: 4).first == "securepush.presence.1" && buckets(1, of: 4).last == "securepush.presence.61")
        #expect(buckets(0, of: 64) == ["securepush.presence.0"])
        #expect(buckets(130, of: 256) == ["securepush.presence.2"])
        #expect(buckets(2, of: 3) == ["securepush.presence.*"], "3 does not divide 64: every bucket")
        #expect(Self.subjects.presenceSubjects(for: nil) == ["securepush.presence.*", "securepush.presence"])
        // The buckets of a node's members do not overlap: a change reaches one of them.
        let all = (0..<8).flatMap { buckets($0, of: 8) }
        #expect(all.count == 64 && Set(all).count == 64)
    }
}
