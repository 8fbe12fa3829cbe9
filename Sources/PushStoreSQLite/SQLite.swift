import CSQLite
import PushStoreLogic

public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// SQLite's result code; 0 for a failure around the database rather than in it (its
    /// files' modes, its data keys).
    public var code: Int32
    public var message: String
    public var description: String { code == 0 ? message : "sqlite error \(code): \(message)" }

    /// Runs `body`, a step of the store's shared code (sealing, user ids), its failure
    /// reported as this backend reports its own failures around the database: code 0.
    static func reporting<T>(_ body: () throws(StoreBackendError) -> T) throws(SQLiteError) -> T {
        do throws(StoreBackendError) {
            return try body()
        } catch {
            throw SQLiteError(code: 0, message: error.description)
        }
    }
}

/// One SQLite connection, used from one thread at a time.
final class SQLiteConnection {
    private(set) var handle: OpaquePointer?

    /// Set once, before the first connection: the store reads no SQLite memory statistics,
    /// and keeping them costs a global mutex on every SQLite allocation (the writer and
    /// the loop's reads both allocate per statement).
    private static let memoryStatisticsOff: Void = { _ = sp_sqlite_disable_memory_statistics() }()

    init(path: String, readOnly: Bool = false) throws(SQLiteError) {
        SQLiteConnection.memoryStatisticsOff
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK else {
            let error = SQLiteError(code: code, message: handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open \(path)")
            sqlite3_close(handle)
            handle = nil
            throw error
        }
        sqlite3_busy_timeout(handle, 5_000)
    }

    deinit { close() }

    func close() {
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "unknown"
            sqlite3_free(message)
            throw SQLiteError(code: code, message: text)
        }
    }

    /// - Parameter persistent: kept and reused (the default), rather than run once.
    func prepare(_ sql: String, persistent: Bool = true) throws(SQLiteError) -> SQLiteStatement {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0, &statement, nil)
        guard code == SQLITE_OK, let statement else { throw lastError(code) }
        return SQLiteStatement(statement, connection: self)
    }

    func lastError(_ code: Int32) -> SQLiteError {
        SQLiteError(code: code, message: handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed")
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
    var lastInsertedRow: UInt64 { UInt64(sqlite3_last_insert_rowid(handle)) }
}

/// A prepared statement, reset after each use so it can be run again without re-parsing.
final class SQLiteStatement {
    private let statement: OpaquePointer
    private unowned let connection: SQLiteConnection

    init(_ statement: OpaquePointer, connection: SQLiteConnection) {
        self.statement = statement
        self.connection = connection
    }

    deinit { sqlite3_finalize(statement) }

    enum Value {
        case int(Int64)
        case text(String)
        case blob([UInt8])
        case null
    }

    func bind(_ values: [Value]) throws(SQLiteError) {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .int(let number): code = sqlite3_bind_int64(statement, index, number)
            case .text(let text): code = SQLiteStatement.bindText(statement, index, text)
            case .blob(let bytes):
                code = bytes.withUnsafeBytes { sqlite3_bind_blob(statement, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), sp_sqlite_transient()) }
            case .null: code = sqlite3_bind_null(statement, index)
            }
            guard code == SQLITE_OK else { throw connection.lastError(code) }
        }
    }

    /// Steps once: true while a row is available.
    func step() throws(SQLiteError) -> Bool {
        let code = sqlite3_step(statement)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.lastError(code)
        }
    }

    /// Binds, runs to completion and resets.
    func run(_ values: [Value]) throws(SQLiteError) {
        try bind(values)
        while try step() {}
        sqlite3_reset(statement)
    }

    // One parameter at a time, for the statements run per request: no `[Value]` array is
    // built (an allocation, and an enum copied through the generic runtime per value).
    // Every parameter is set before each run, so no stale binding is ever used; the
    // statement must be reset, which `runBound` and the readers' `reset` guarantee.

    func set(_ index: Int32, _ number: Int64) throws(SQLiteError) {
        let code = sqlite3_bind_int64(statement, index, number)
        guard code == SQLITE_OK else { throw connection.lastError(code) }
    }

    func set(_ index: Int32, _ number: UInt64) throws(SQLiteError) {
        try set(index, Int64(bitPattern: number))
    }

    func set(_ index: Int32, _ text: String) throws(SQLiteError) {
        let code = SQLiteStatement.bindText(statement, index, text)
        guard code == SQLITE_OK else { throw connection.lastError(code) }
    }

    /// Binds all of `text`'s UTF-8 bytes, never "up to the first NUL" (a length of -1):
    /// a name is compared as exact bytes ([3.3-8]), so it must reach SQL whole.
    private static func bindText(_ statement: OpaquePointer, _ index: Int32, _ text: String) -> Int32 {
        var text = text
        return text.withUTF8 { bytes in
            // A nil address would bind NULL: an empty text binds a literal's.
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_text(statement, index, "", 0, sp_sqlite_transient()) }
            return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text(statement, index, $0, Int32(clamping: bytes.count), sp_sqlite_transient())
            }
        }
    }

    func set(_ index: Int32, _ bytes: [UInt8]) throws(SQLiteError) {
        let code = bytes.withUnsafeBytes {
            sqlite3_bind_blob(statement, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), sp_sqlite_transient())
        }
        guard code == SQLITE_OK else { throw connection.lastError(code) }
    }

    /// Binds NULL for nil (a STORE's row has no push, a SEND without a key no key).
    func set(_ index: Int32, _ number: Int64?) throws(SQLiteError) {
        guard let number else { return try setNull(index) }
        try set(index, number)
    }

    func set(_ index: Int32, _ number: UInt64?) throws(SQLiteError) { try set(index, number.map { Int64(bitPattern: $0) }) }

    func set(_ index: Int32, _ text: String?) throws(SQLiteError) {
        guard let text else { return try setNull(index) }
        try set(index, text)
    }

    func set(_ index: Int32, _ bytes: [UInt8]?) throws(SQLiteError) {
        guard let bytes else { return try setNull(index) }
        try set(index, bytes)
    }

    func setNull(_ index: Int32) throws(SQLiteError) {
        let code = sqlite3_bind_null(statement, index)
        guard code == SQLITE_OK else { throw connection.lastError(code) }
    }

    /// Runs what `set` bound to completion; reset even when a step fails, so the next
    /// `set` never meets a statement still running.
    func runBound() throws(SQLiteError) {
        defer { sqlite3_reset(statement) }
        while try step() {}
    }

    func reset() { sqlite3_reset(statement) }

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    /// The column's text, all of its bytes (a NUL inside it included).
    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// The column's bytes in place, valid only inside `body` (no copy).
    func withBlob<T>(_ column: Int32, _ body: (UnsafeRawBufferPointer) throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        let count = Int(sqlite3_column_bytes(statement, column))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? sqlite3_column_blob(statement, column) : nil, count: count))
    }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let pointer = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
