#if canImport(Glibc)
import Glibc
#endif
@testable import PushStoreLogic
@testable import PushStoreSQLite
import Synchronization
import Testing
import PushClock
@testable import PushStore

/// The SQLite store's group commit, over a writer that only records its groups: which
/// writes share a transaction (and so an fsync), and when.
@Suite("Group commit: which writes share an fsync")
struct GroupCommitWriterTests {
    /// Records each committed group's size; `commit` answers `.ok` for every write.
    final class RecordingWriter: PayloadWriter {
        let groups = Mutex<[Int]>([])
        let idleSteps = Atomic<Int>(0)
        func commit(_ operations: [WriteOperation]) throws -> [WriteOutcome] {
            groups.withLock { $0.append(operations.count) }
            return operations.map { _ in .ok }
        }
        func sweepExpired(nowMs: UInt64) throws -> Int { 0 }
        func idleStep(nowMs: UInt64) throws -> Bool {
            idleSteps.add(1, ordering: .sequentiallyConsistent)
            return false
        }
    }

    /// What the writer handed back, in order, and when (monotonic ns).
    final class Deliveries: Sendable {
        let seen = Mutex<[(tickets: [UInt64], atNs: UInt64)]>([])
        func record(_ tickets: [UInt64]) {
            let now = Clocks.monotonicNanoseconds()
            seen.withLock { $0.append((tickets, now)) }
        }
        /// Polls until `count` tickets were delivered or `seconds` pass.
        func waitFor(tickets count: Int, seconds: Double = 5) -> [(tickets: [UInt64], atNs: UInt64)] {
            let deadline = Clocks.monotonicNanoseconds() + UInt64(seconds * 1e9)
            while Clocks.monotonicNanoseconds() < deadline {
                let all = seen.withLock { $0 }
                if all.reduce(0, { $0 + $1.tickets.count }) >= count { return all }
                sched_yield()
            }
            return seen.withLock { $0 }
        }
    }

    static let ack = WriteOperation.ack(sequence: 1, userID: 1, deviceID: "phone")

    func started(_ deliveries: Deliveries, writer: RecordingWriter = RecordingWriter(),
                 companyWaitNs: UInt64 = GroupCommitWriter.companyWaitNs) throws -> GroupCommitWriter {
        let committer = GroupCommitWriter(writer: writer, sweepIntervalMs: 3_600_000, companyWaitNs: companyWaitNs) { tickets, _ in
            deliveries.record(tickets)
        }
        try committer.start()
        // A writer starts with its background work to look at, and commits whatever is
        // queued then at once: the writes below are submitted once that is done.
        let deadline = Clocks.monotonicNanoseconds() + 5_000_000_000
        while writer.idleSteps.load(ordering: .sequentiallyConsistent) == 0, Clocks.monotonicNanoseconds() < deadline { sched_yield() }
        return committer
    }

    @Test("a device's ACK waits for the next urgent write and shares its commit: at one message in flight the next SEND no longer waits for the ACK's fsync")
    func ackRidesWithTheNextUrgentWrite() throws {
        let deliveries = Deliveries()
        let writer = RecordingWriter()
        // A wait far longer than the test, so that a descheduled test thread cannot see the
        // ACK committed alone for being late: only the urgent write may end its wait.
        let committer = try started(deliveries, writer: writer, companyWaitNs: 60_000_000_000)
        defer { committer.stop() }
        committer.submit(GroupCommitWriterTests.ack, ticket: 1)
        let tenth = Clocks.monotonicNanoseconds() + 100_000_000
        while Clocks.monotonicNanoseconds() < tenth { sched_yield() }
        #expect(writer.groups.withLock { $0 }.isEmpty, "the ACK was committed alone")
        committer.submit(.recall(sequence: 2), ticket: 2)
        let seen = deliveries.waitFor(tickets: 2)
        #expect(seen.map(\.tickets) == [[1, 2]])
        #expect(writer.groups.withLock { $0 } == [2])
    }

    @Test("an ACK with no company is still committed, within its wait")
    func loneAckIsCommittedWithinItsWait() throws {
        let deliveries = Deliveries()
        let committer = try started(deliveries)
        defer { committer.stop() }
        let submittedNs = Clocks.monotonicNanoseconds()
        committer.submit(GroupCommitWriterTests.ack, ticket: 7)
        let seen = deliveries.waitFor(tickets: 1)
        #expect(seen.map(\.tickets) == [[7]])
        let waitedNs = (seen.first?.atNs ?? .max) &- submittedNs
        #expect(waitedNs >= GroupCommitWriter.companyWaitNs, "committed before its wait was over")
        // Generous: the writer thread may be scheduled late on a busy machine.
        #expect(waitedNs < GroupCommitWriter.companyWaitNs + 500_000_000)
    }

    @Test("an urgent write is committed at once, without waiting for company")
    func urgentWriteIsNotHeld() throws {
        let deliveries = Deliveries()
        let committer = try started(deliveries)
        defer { committer.stop() }
        committer.submit(.recall(sequence: 3), ticket: 3)
        let seen = deliveries.waitFor(tickets: 1)
        #expect(seen.map(\.tickets) == [[3]])
    }

    @Test("stop commits an ACK that is still waiting for company")
    func stopCommitsWaitingAck() throws {
        let deliveries = Deliveries()
        // Still waiting when stop comes, however late this thread runs.
        let committer = try started(deliveries, companyWaitNs: 60_000_000_000)
        committer.submit(GroupCommitWriterTests.ack, ticket: 9)
        committer.stop()
        #expect(deliveries.seen.withLock { $0 }.map(\.tickets) == [[9]])
    }
}
