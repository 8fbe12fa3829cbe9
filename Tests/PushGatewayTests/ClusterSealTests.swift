import Testing
import PushNATS
import PushSecurity
@testable import PushGateway

/// The authentication of cluster messages and queue records (protocol/CLUSTER.md,
/// "Authentication"): what is sealed opens only under the same deployment key, on the same
/// subject, unaltered; the replay rule; and a stored queue record's checks.
@Suite("Gateway cluster: authentication")
struct ClusterSealTests {
    static let key = SecretKey(bytes: Array(repeating: 0x11, count: 32))!
    static let seal = ClusterSeal(serverKey: key)
    static let message = ForwardBatch(id: 7, pushes: []).encoded()

    @Test("a sealed message opens on its subject, with its sender, time and nonce; it adds 50 bytes and the sender's name")
    func roundTrip() throws {
        let sealed = Self.seal.seal(Self.message, subject: "securepush.node.g2.push", sender: "g1", sentAtMs: 1_000, nonce: 42)
        #expect(sealed.count == Self.message.count + ClusterSeal.overhead + 2)
        #expect(ClusterSeal.overhead == 50)
        let opened = try Self.seal.open(sealed, subject: "securepush.node.g2.push")
        #expect(opened == ClusterSeal.Opened(sender: "g1", sentAtMs: 1_000, nonce: 42, message: Self.message))
    }

    @Test("refused: another subject, another deployment, any byte changed, cut short, or no seal at all")
    func refusals() {
        let subject = "securepush.node.g2.push"
        let sealed = Self.seal.seal(Self.message, subject: subject, sender: "g1", sentAtMs: 1_000, nonce: 42)
        #expect(throws: ClusterAuthError.badTag) { try Self.seal.open(sealed, subject: "securepush.node.g3.push") }
        let other = ClusterSeal(serverKey: SecretKey(bytes: Array(repeating: 0x22, count: 32))!)
        #expect(throws: ClusterAuthError.badTag) { try other.open(sealed, subject: subject) }
        for index in 1..<sealed.count {
            var altered = sealed
            altered[index] ^= 0x01
            #expect(throws: (any Error).self, "byte \(index)") { try Self.seal.open(altered, subject: subject) }
        }
        #expect(throws: ClusterAuthError.truncated) { try Self.seal.open(Array(sealed.prefix(20)), subject: subject) }
        #expect(throws: ClusterAuthError.unsealed) { try Self.seal.open(Self.message, subject: subject) }
        #expect(throws: ClusterAuthError.unsealed) { try Self.seal.open([], subject: subject) }
        // The sender's name length pointing past the tag.
        var long = sealed
        long[1] = 255
        #expect(throws: ClusterAuthError.truncated) { try Self.seal.open(long, subject: subject) }
    }

    @Test("the replay rule: within ±30 s of the receiver's clock, each nonce once")
    func replayWindow() {
        var guardian = ClusterReplayGuard(windowMs: 30_000)
        let now: UInt64 = 1_000_000
        #expect(throws: Never.self) { try guardian.admit(sentAtMs: now - 29_000, nonce: 1, nowMs: now) }
        #expect(throws: ClusterAuthError.replayed) { try guardian.admit(sentAtMs: now - 29_000, nonce: 1, nowMs: now + 500) }
        #expect(throws: ClusterAuthError.stale) { try guardian.admit(sentAtMs: now - 30_001, nonce: 2, nowMs: now) }
        #expect(throws: ClusterAuthError.stale) { try guardian.admit(sentAtMs: now + 30_001, nonce: 3, nowMs: now) }
        #expect(throws: Never.self) { try guardian.admit(sentAtMs: now + 30_000, nonce: 4, nowMs: now) }
        // Remembered for as long as its time passes: nonce 4, sent 30 s ahead, until 60 s from now.
        #expect(throws: ClusterAuthError.replayed) { try guardian.admit(sentAtMs: now + 30_000, nonce: 4, nowMs: now + 59_999) }
        #expect(throws: ClusterAuthError.replayed) { try guardian.admit(sentAtMs: now + 30_000, nonce: 4, nowMs: now + 60_000) }
        #expect(throws: ClusterAuthError.stale) { try guardian.admit(sentAtMs: now + 30_000, nonce: 4, nowMs: now + 60_001) }
    }

    @Test("memory is bounded: nonces older than four windows are forgotten")
    func replayMemory() throws {
        var guardian = ClusterReplayGuard(windowMs: 1_000)
        for step in 0..<10_000 as Range<UInt64> {
            try guardian.admit(sentAtMs: step, nonce: step, nowMs: step)
        }
        #expect(guardian.remembered <= 4_000)
        #expect(guardian.remembered >= 2_000)
    }

    @Test("a stored queue record: its device's subject, written within the window of JetStream's time stamp, after the sequence it replaced")
    func storedRecord() throws {
        let subject = "securepush.queue.phone"
        let record = QueueRecord(user: "alice", entries: [QueueRecord.Entry(push: ClusterUnitTests.push(1, priority: 5, collapse: nil, expiresIn: 1_000),
                                                                            returned: false, rank: 0)])
        let bytes = Self.seal.seal(record.encoded(), subject: subject, sender: "g1", sentAtMs: 5_000_000, nonce: 3)
        let read = { (stored: StoredMessage, subject: String) throws(ClusterQueueReadError) -> QueueRecord in
            try ClusterQueueRecords.read(stored, subject: subject, seal: Self.seal)
        }
        #expect(try read(StoredMessage(sequence: 9, subject: subject, data: bytes, storedAtMs: 5_000_040), subject) == record)
        let checks: [(StoredMessage, String, ClusterAuthError)] = [
            (StoredMessage(sequence: 9, subject: subject, data: bytes, storedAtMs: 5_000_040), "securepush.queue.tablet", .badTag),
            // A copy written again a minute later: JetStream's stamp gives it away.
            (StoredMessage(sequence: 20, subject: subject, data: bytes, storedAtMs: 5_060_000), subject, .stale),
            (StoredMessage(sequence: 9, subject: subject, data: bytes, storedAtMs: nil), subject, .stale),
            (StoredMessage(sequence: 3, subject: subject, data: bytes, storedAtMs: 5_000_040), subject, .replayed),
            // What the build before authentication wrote, or a client without the key.
            (StoredMessage(sequence: 9, subject: subject, data: record.encoded(), storedAtMs: 5_000_040), subject, .unsealed),
            (StoredMessage(sequence: 9, subject: subject, data: [], storedAtMs: 5_000_040), subject, .unsealed),
        ]
        for (stored, subject, reason) in checks {
            do {
                _ = try read(stored, subject)
                Issue.record("trusted: \(stored)")
            } catch {
                guard case .unauthenticated(let error) = error else { Issue.record("\(error)"); continue }
                #expect(error == reason, "\(stored)")
            }
        }
    }
}
