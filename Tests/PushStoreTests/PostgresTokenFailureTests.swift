import Foundation
import PushPostgres
@testable import PushStore
import PushTestSupport
import Testing

/// The BAD_TOKEN counts every store of a PostgreSQL database shares ([8-9]): stores write
/// their batches in any order, and the count must not depend on it.
@Suite("Refused tokens counted in PostgreSQL", .serialized, .enabled(if: PostgresCluster.testsEnabled))
struct PostgresTokenFailureTests {
    @Test("[8-9] batches written out of order add up in one window; one a window later starts anew; a stale one changes nothing")
    func batchesInAnyOrder() async throws {
        try await onOwnThread {
            let url = try PostgresCluster.shared().createDatabase()
            _ = try PostgresAdministration(url: url)  // creates the tables
            let connection = try PostgresBlockingConnection(url)
            defer { connection.close() }
            let window: UInt64 = 10_000
            let t: UInt64 = 1_700_000_000_000
            func write(_ times: [UInt64]) throws {
                for statement in PostgresWriteStatements.tokenFailures(times.map { TokenFailure(address: "10.0.0.1", nowMs: $0) }, windowMs: window) {
                    _ = try connection.query(statement.sql, statement.parameters)
                }
            }
            func row() throws -> (failures: Int64, start: Int64) {
                let result = try connection.query("SELECT failures, window_start FROM token_failures WHERE address = '10.0.0.1'")
                return (try result.int64(0, 0), try result.int64(0, 1))
            }
            // Store B's batch (its first failure at t + 5 s) is written before store A's (t).
            try write((0..<5).map { t + 5_000 + UInt64($0) })
            try write((0..<15).map { t + UInt64($0) })
            #expect(try row() == (20, Int64(t)), "one window, from the earliest failure")
            try write([t - 20_000])
            #expect(try row() == (20, Int64(t)), "a batch from a window that is over changes nothing")
            try write([t + 30_000])
            #expect(try row() == (1, Int64(t + 30_000)), "a window later: a new window")
        }
    }
}
