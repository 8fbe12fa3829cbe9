/// One parameter or column value, in the few types the store needs. Parameters travel in
/// binary with their type named (int8, int4, text, bytea, bool), so the server never
/// guesses from text; `.null` lets the server infer the type from where it is used.
/// The arrays (one dimension, nil elements NULL) are parameters only: they let one
/// statement of a fixed shape carry any number of rows (`unnest`), so it can be prepared
/// once however many rows a batch has.
public enum PostgresValue: Sendable, Hashable {
    case null
    case int64(Int64)
    case int32(Int32)
    case text(String)
    case bytes([UInt8])
    case bool(Bool)
    case int64Array([Int64?])
    case int32Array([Int32?])
    case textArray([String?])
    case bytesArray([[UInt8]?])
    case boolArray([Bool?])
}

/// PostgreSQL type OIDs (pg_type.oid) this client sends and reads.
enum PostgresType {
    static let bool: UInt32 = 16
    static let bytea: UInt32 = 17
    static let name: UInt32 = 19
    static let int8: UInt32 = 20
    static let int2: UInt32 = 21
    static let int4: UInt32 = 23
    static let text: UInt32 = 25
    static let bpchar: UInt32 = 1042
    static let varchar: UInt32 = 1043
    static let boolArray: UInt32 = 1000
    static let byteaArray: UInt32 = 1001
    static let int4Array: UInt32 = 1007
    static let textArray: UInt32 = 1009
    static let int8Array: UInt32 = 1016
}
