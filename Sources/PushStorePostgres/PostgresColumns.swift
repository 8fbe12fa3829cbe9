import PushPostgres
import PushWire

/// How the store's values travel as PostgreSQL's signed integers and byte strings.
///
/// Times, counts and limits are unsigned in the store and `bigint` in the database:
/// clamped into range on the way in (a registration that never expires is stored as
/// `Int64.max`, which compares the same), and a negative value read back is 0. Internal
/// user ids are 63-bit, so they fit either way.
extension PostgresValue {
    static func uint(_ value: UInt64) -> PostgresValue { .int64(Int64(clamping: value)) }
    static func int(_ value: Int) -> PostgresValue { .int64(Int64(value)) }
    static func id(_ id: PayloadID) -> PostgresValue { .bytes(id.bytes) }
}

extension PostgresResult {
    /// A `bigint` (or smaller) column as an unsigned value; NULL and negatives read as 0.
    func uint(_ row: Int, _ column: Int) throws(PostgresError) -> UInt64 {
        if isNull(row, column) { return 0 }
        return UInt64(max(0, try int64(row, column)))
    }

    /// A nullable `bigint` column.
    func optionalInt(_ row: Int, _ column: Int) throws(PostgresError) -> Int64? {
        isNull(row, column) ? nil : try int64(row, column)
    }

    /// A `bytea` column of a payload ID; a malformed one is the database's fault.
    func payloadID(_ row: Int, _ column: Int) throws(PostgresError) -> PayloadID {
        let bytes = try bytes(row, column)
        guard let id = PayloadID(bytes: bytes) else {
            throw PostgresError(kind: .protocolViolation, message: "a payload id of \(bytes.count) bytes, not 16")
        }
        return id
    }
}

extension PostgresBlockingConnection {
    /// Runs `body` between BEGIN and COMMIT, rolling back if it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        _ = try query("BEGIN")
        do {
            let result = try body()
            _ = try query("COMMIT")
            return result
        } catch {
            _ = try? query("ROLLBACK")
            throw error
        }
    }
}
