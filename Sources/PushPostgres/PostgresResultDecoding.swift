import CPostgres

/// What one PGresult from PQgetResult means for the request it belongs to.
enum StatementOutcome {
    /// A statement's rows (or its command tag alone).
    case result(PostgresResult)
    /// The statement failed, or its answer could not be read.
    case failure(PostgresError)
    /// Skipped: an earlier statement in the same pipeline segment failed.
    case aborted
    /// PGRES_PIPELINE_SYNC: the request's segment is complete.
    case sync
}

/// Reads PGresults (binary format) into `PostgresResult`s. Everything from the server is
/// checked: a length that does not fit its type, text that is not UTF-8 or a column type
/// this client does not read is a `.protocolViolation`, never a trap.
enum PostgresResultDecoding {
    static func outcome(of result: OpaquePointer) -> StatementOutcome {
        let status = PQresultStatus(result)
        switch status {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            do throws(PostgresError) {
                return .result(try decode(result))
            } catch {
                return .failure(error)
            }
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
            return .failure(serverError(result))
        case PGRES_PIPELINE_ABORTED:
            return .aborted
        case PGRES_PIPELINE_SYNC:
            return .sync
        case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
            return .failure(.violation("COPY is not supported by this client"))
        default:
            return .failure(.violation(errorText(result) ?? "unexpected result status \(String(cString: PQresStatus(status)))"))
        }
    }

    /// The server's primary message and SQLSTATE. DETAIL is left out: it quotes row values
    /// (the key of a unique violation), which may be secrets, and errors end up in logs.
    static func serverError(_ result: OpaquePointer) -> PostgresError {
        let sqlState = PQresultErrorField(result, sp_PG_DIAG_SQLSTATE).map { String(cString: $0) }
        let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
        let message = primary ?? errorText(result) ?? "the statement failed"
        return PostgresError(kind: .server, sqlState: sqlState, message: message)
    }

    private static func errorText(_ result: OpaquePointer) -> String? {
        guard let text = PQresultErrorMessage(result) else { return nil }
        let message = PostgresURL.trimmed(String(cString: text))
        return message.isEmpty ? nil : message
    }

    static func decode(_ result: OpaquePointer) throws(PostgresError) -> PostgresResult {
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        var columns: [String] = []
        var types: [UInt32] = []
        columns.reserveCapacity(columnCount)
        for column in 0..<columnCount {
            let name = PQfname(result, Int32(column)).map { String(cString: $0) } ?? "?column?"
            let type = PQftype(result, Int32(column))
            guard isSupported(type) else {
                throw .violation("column \"\(name)\" has type OID \(type), which this client does not read")
            }
            guard PQfformat(result, Int32(column)) == 1 else {
                throw .violation("column \"\(name)\" came in text format, not binary")
            }
            columns.append(name)
            types.append(type)
        }
        var rows: [[PostgresValue]] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values: [PostgresValue] = []
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                values.append(try value(result, row: Int32(row), column: Int32(column), type: types[column], name: columns[column]))
            }
            rows.append(values)
        }
        let tag = PQcmdTuples(result).map { String(cString: $0) } ?? ""
        return PostgresResult(columns: columns, rows: rows, affectedRows: Int(tag) ?? 0)
    }

    private static func isSupported(_ type: UInt32) -> Bool {
        switch type {
        case PostgresType.int8, PostgresType.int4, PostgresType.int2, PostgresType.text, PostgresType.varchar,
             PostgresType.name, PostgresType.bpchar, PostgresType.bytea, PostgresType.bool:
            true
        default:
            false
        }
    }

    private static func value(
        _ result: OpaquePointer, row: Int32, column: Int32, type: UInt32, name: String
    ) throws(PostgresError) -> PostgresValue {
        if PQgetisnull(result, row, column) != 0 { return .null }
        let length = Int(PQgetlength(result, row, column))
        guard length >= 0, let start = PQgetvalue(result, row, column) else {
            throw .violation("column \"\(name)\": no value")
        }
        let bytes = UnsafeRawBufferPointer(start: UnsafeRawPointer(start), count: length)
        switch type {
        case PostgresType.int8:
            return .int64(Int64(bitPattern: try integer(bytes, size: 8, name: name)))
        case PostgresType.int4:
            return .int32(Int32(truncatingIfNeeded: try integer(bytes, size: 4, name: name)))
        case PostgresType.int2:
            return .int32(Int32(Int16(truncatingIfNeeded: try integer(bytes, size: 2, name: name))))
        case PostgresType.bool:
            guard length == 1 else { throw .violation("column \"\(name)\": a bool of \(length) bytes") }
            return .bool(bytes[0] != 0)
        case PostgresType.bytea:
            return .bytes(Array(bytes))
        default:
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw .violation("column \"\(name)\": text that is not UTF-8")
            }
            return .text(text)
        }
    }

    /// A big-endian integer of exactly `size` bytes, unsigned in the low bits.
    private static func integer(_ bytes: UnsafeRawBufferPointer, size: Int, name: String) throws(PostgresError) -> UInt64 {
        guard bytes.count == size else {
            throw .violation("column \"\(name)\": an integer of \(bytes.count) bytes where \(size) were expected")
        }
        var value: UInt64 = 0
        for byte in bytes { value = value << 8 | UInt64(byte) }
        return value
    }
}
