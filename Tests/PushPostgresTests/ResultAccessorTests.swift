import PushPostgres
import Testing

/// The typed accessors the store reads rows with: no server needed.
@Suite struct ResultAccessorTests {
    let result = PostgresResult(
        columns: ["id", "n", "name", "body", "flag", "gone"],
        rows: [[.int64(7), .int32(3), .text("ann"), .bytes([0, 1, 0]), .bool(true), .null]],
        affectedRows: 1)

    @Test("each accessor returns its own type; int64 widens an int4")
    func typedAccess() throws {
        #expect(try result.int64(0, 0) == 7)
        #expect(try result.int64(0, 1) == 3)
        #expect(try result.int32(0, 1) == 3)
        #expect(try result.text(0, 2) == "ann")
        #expect(try result.bytes(0, 3) == [0, 1, 0])
        #expect(try result.bool(0, 4))
        #expect(result.isNull(0, 5))
        #expect(!result.isNull(0, 0))
    }

    @Test("a type mismatch, a NULL or an index out of range is a typed error naming the column, not the value")
    func mismatchesThrow() {
        #expect(throws: PostgresError.self) { try result.int32(0, 0) }
        #expect(throws: PostgresError.self) { try result.text(0, 5) }
        #expect(throws: PostgresError.self) { try result.bytes(1, 0) }
        #expect(throws: PostgresError.self) { try result.bool(0, 9) }
        do {
            _ = try result.int64(0, 2)
            Issue.record("expected a mismatch")
        } catch {
            #expect(error.kind == .protocolViolation)
            #expect(error.message.contains("\"name\""))
            #expect(!error.message.contains("ann"))
        }
    }
}
