import Foundation
import PushPostgres
@testable import PushStore
@testable import PushStoreLogic
@testable import PushStorePostgres
import PushTestSupport
import Testing

/// The BAD_TOKEN counts every store of a PostgreSQL database shares ([8-9]): stores write
/// their batches in any order, and the count must not depend on it. The rule
/// (`FailureWindow.merged`) decides; the database keeps the values by compare-and-set.
@Suite("Refused tokens counted in PostgreSQL", .ownThread, .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresTokenFailureTests {
    static let window: UInt64 = 10_000
    static let t: UInt64 = 1_700_000_000_000

    /// What `PostgresLimitWriter` does with one store's batch, in one round: read the
    /// address's window, have the rule merge the batch into it at `nowMs`, write the result
    /// where the row is still what was read. Returns whether it wrote.
    private func merge(_ batch: FailureWindow, at nowMs: UInt64, on connection: PostgresBlockingConnection,
                       readFirst: (() throws -> Void)? = nil) throws -> Bool {
        let read = PostgresWriteStatements.readTokenWindows(["10.0.0.1"])
        let rows = try connection.query(read.sql, read.parameters)
        let before = rows.rows.isEmpty ? nil : FailureWindow(startMs: UInt64(try rows.int64(0, 1)), failures: Int(try rows.int64(0, 2)))
        try readFirst?()
        guard let after = FailureWindow.merged(before, batch, nowMs: nowMs, windowMs: Self.window), after != before else { return false }
        var written = false
        for statement in PostgresWriteStatements.tokenWindows([.init(key: "10.0.0.1", before: before, after: after)]) {
            written = try !connection.query(statement.sql, statement.parameters).rows.isEmpty || written
        }
        return written
    }

    private func row(_ connection: PostgresBlockingConnection) throws -> (failures: Int64, start: Int64) {
        let result = try connection.query("SELECT failures, window_start FROM token_failures WHERE address = '10.0.0.1'")
        return (try result.int64(0, 0), try result.int64(0, 1))
    }

    @Test("[8-9] batches written out of order add up in one window; one a window later starts anew; a stale one changes nothing")
    func batchesInAnyOrder() async throws {
        try await onOwnThread {
            let url = try PostgresCluster.shared().createDatabase()
            _ = try PostgresAdministration(url: url)  // creates the tables
            let connection = try PostgresBlockingConnection(url)
            defer { connection.close() }
            let t = Self.t
            // Store B's batch (its first failure at t + 5 s) is written before store A's (t).
            #expect(try merge(FailureWindow(startMs: t + 5_000, failures: 5), at: t + 5_100, on: connection))
            #expect(try merge(FailureWindow(startMs: t, failures: 15), at: t + 5_200, on: connection))
            #expect(try row(connection) == (20, Int64(t)), "one window, from the earliest failure")
            #expect(try merge(FailureWindow(startMs: t - 20_000, failures: 1), at: t + 5_300, on: connection) == false)
            #expect(try row(connection) == (20, Int64(t)), "a batch from a window that is over changes nothing")
            #expect(try merge(FailureWindow(startMs: t + 30_000, failures: 1), at: t + 30_000, on: connection))
            #expect(try row(connection) == (1, Int64(t + 30_000)), "a window later: a new window")
        }
    }

    @Test("[8-9] a batch merged into a window another store changed meanwhile writes nothing; decided again, both count")
    func compareAndSet() async throws {
        try await onOwnThread {
            let url = try PostgresCluster.shared().createDatabase()
            _ = try PostgresAdministration(url: url)
            let connection = try PostgresBlockingConnection(url)
            defer { connection.close() }
            let t = Self.t
            #expect(try merge(FailureWindow(startMs: t, failures: 3), at: t, on: connection))
            // Another store writes its batch between this one's read and its write.
            let wrote = try merge(FailureWindow(startMs: t + 10, failures: 4), at: t + 20, on: connection) { () throws in
                let other = try merge(FailureWindow(startMs: t + 5, failures: 2), at: t + 15, on: connection)
                #expect(other)
            }
            #expect(wrote == false, "the row is no longer what was read")
            #expect(try row(connection) == (5, Int64(t)))
            #expect(try merge(FailureWindow(startMs: t + 10, failures: 4), at: t + 20, on: connection))
            #expect(try row(connection) == (9, Int64(t)), "every failure of the three batches counts")
            // Absent when read, there when written: the insert writes nothing either.
            _ = try connection.query("DELETE FROM token_failures")
            let inserted = try merge(FailureWindow(startMs: t, failures: 1), at: t, on: connection) { () throws in
                let other = try merge(FailureWindow(startMs: t, failures: 7), at: t, on: connection)
                #expect(other)
            }
            #expect(inserted == false)
            #expect(try row(connection) == (7, Int64(t)))
        }
    }
}
