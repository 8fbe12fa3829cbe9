/// The rows of one statement, decoded, plus the count its command tag reports (rows
/// inserted, updated, deleted or selected).
public struct PostgresResult: Sendable {
    public var columns: [String]
    public var rows: [[PostgresValue]]
    public var affectedRows: Int

    public init(columns: [String] = [], rows: [[PostgresValue]] = [], affectedRows: Int = 0) {
        self.columns = columns
        self.rows = rows
        self.affectedRows = affectedRows
    }

    /// The value at `row`, `column`; a `.protocolViolation` error when out of range.
    public func value(_ row: Int, _ column: Int) throws(PostgresError) -> PostgresValue {
        guard rows.indices.contains(row) else {
            throw .violation("row \(row) out of range (the result has \(rows.count))")
        }
        guard rows[row].indices.contains(column) else {
            throw .violation("column \(column) out of range (the result has \(rows[row].count))")
        }
        return rows[row][column]
    }

    /// An int8 column; an int4 or int2 value widens.
    public func int64(_ row: Int, _ column: Int) throws(PostgresError) -> Int64 {
        switch try value(row, column) {
        case .int64(let value): return value
        case .int32(let value): return Int64(value)
        case let other: throw mismatch(row, column, expected: "an integer", found: other)
        }
    }

    /// An int4 or int2 column.
    public func int32(_ row: Int, _ column: Int) throws(PostgresError) -> Int32 {
        let found = try value(row, column)
        guard case .int32(let value) = found else { throw mismatch(row, column, expected: "an int4", found: found) }
        return value
    }

    public func text(_ row: Int, _ column: Int) throws(PostgresError) -> String {
        let found = try value(row, column)
        guard case .text(let value) = found else { throw mismatch(row, column, expected: "text", found: found) }
        return value
    }

    public func bytes(_ row: Int, _ column: Int) throws(PostgresError) -> [UInt8] {
        let found = try value(row, column)
        guard case .bytes(let value) = found else { throw mismatch(row, column, expected: "bytea", found: found) }
        return value
    }

    public func bool(_ row: Int, _ column: Int) throws(PostgresError) -> Bool {
        let found = try value(row, column)
        guard case .bool(let value) = found else { throw mismatch(row, column, expected: "a bool", found: found) }
        return value
    }

    /// True when the value is SQL NULL, or there is no such row or column (no value there).
    public func isNull(_ row: Int, _ column: Int) -> Bool {
        guard rows.indices.contains(row), rows[row].indices.contains(column) else { return true }
        return rows[row][column] == .null
    }

    private func mismatch(_ row: Int, _ column: Int, expected: String, found: PostgresValue) -> PostgresError {
        let name = columns.indices.contains(column) ? "\"\(columns[column])\"" : "\(column)"
        return .violation("row \(row) column \(name): expected \(expected), found \(found.typeName)")
    }
}

extension PostgresValue {
    /// For error messages: the kind of value, never the value (it may be a secret).
    var typeName: String {
        switch self {
        case .null: "NULL"
        case .int64: "an int8"
        case .int32: "an int4"
        case .text: "text"
        case .bytes: "bytea"
        case .bool: "a bool"
        case .int64Array: "an int8 array"
        case .int32Array: "an int4 array"
        case .textArray: "a text array"
        case .bytesArray: "a bytea array"
        case .boolArray: "a bool array"
        }
    }
}
