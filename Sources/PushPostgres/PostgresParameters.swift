/// Statement parameters in libpq's arrays: every value in binary with its type OID, so
/// the server neither parses text nor guesses a type; `.null` is a NULL value pointer with
/// type 0 (the server infers the type from where the parameter is used).
struct PostgresParameters {
    /// The protocol counts parameters in 16 bits.
    static let maximumCount = 65_535

    private(set) var types: [UInt32] = []
    private(set) var lengths: [Int32] = []
    private(set) var formats: [Int32] = []
    /// Offsets into `storage`; nil for NULL.
    private var offsets: [Int?] = []
    /// Every value's bytes, back to back, plus one spare byte so that an empty value still
    /// has a non-NULL address (a NULL address means SQL NULL).
    private var storage: [UInt8] = []

    var count: Int32 { Int32(types.count) }

    init(_ values: [PostgresValue]) {
        for value in values { append(value) }
        storage.append(0)
    }

    private mutating func append(_ value: PostgresValue) {
        switch value {
        case .null:
            add(type: 0, bytes: nil)
        case .int64(let number):
            add(type: PostgresType.int8, bytes: PostgresParameters.bigEndianBytes(UInt64(bitPattern: number), count: 8))
        case .int32(let number):
            add(type: PostgresType.int4, bytes: PostgresParameters.bigEndianBytes(UInt64(UInt32(bitPattern: number)), count: 4))
        case .text(let text):
            add(type: PostgresType.text, bytes: Array(text.utf8))
        case .bytes(let bytes):
            add(type: PostgresType.bytea, bytes: bytes)
        case .bool(let flag):
            add(type: PostgresType.bool, bytes: [flag ? 1 : 0])
        case .int64Array(let numbers):
            add(type: PostgresType.int8Array,
                bytes: PostgresParameters.array(PostgresType.int8, numbers.map { $0.map { PostgresParameters.bigEndianBytes(UInt64(bitPattern: $0), count: 8) } }))
        case .int32Array(let numbers):
            add(type: PostgresType.int4Array, bytes: PostgresParameters.array(
                PostgresType.int4, numbers.map { $0.map { PostgresParameters.bigEndianBytes(UInt64(UInt32(bitPattern: $0)), count: 4) } }))
        case .textArray(let texts):
            add(type: PostgresType.textArray, bytes: PostgresParameters.array(PostgresType.text, texts.map { $0.map { Array($0.utf8) } }))
        case .bytesArray(let values):
            add(type: PostgresType.byteaArray, bytes: PostgresParameters.array(PostgresType.bytea, values))
        case .boolArray(let flags):
            add(type: PostgresType.boolArray, bytes: PostgresParameters.array(PostgresType.bool, flags.map { $0.map { [$0 ? 1 : 0] } }))
        }
    }

    /// A one-dimensional array in the binary format (`array_send`): dimensions, whether
    /// any element is NULL, the element type, then each element's length (-1: NULL) and bytes.
    static func array(_ elementType: UInt32, _ elements: [[UInt8]?]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(20 + elements.reduce(0) { $0 + 4 + ($1?.count ?? 0) })
        func int32(_ value: Int32) {
            let bits = UInt32(bitPattern: value)
            out += [UInt8(truncatingIfNeeded: bits >> 24), UInt8(truncatingIfNeeded: bits >> 16),
                    UInt8(truncatingIfNeeded: bits >> 8), UInt8(truncatingIfNeeded: bits)]
        }
        int32(elements.isEmpty ? 0 : 1)
        int32(elements.contains { $0 == nil } ? 1 : 0)
        int32(Int32(bitPattern: elementType))
        guard !elements.isEmpty else { return out }
        int32(Int32(clamping: elements.count))
        int32(1)
        for element in elements {
            guard let element else {
                int32(-1)
                continue
            }
            int32(Int32(clamping: element.count))
            out += element
        }
        return out
    }

    private mutating func add(type: UInt32, bytes: [UInt8]?) {
        types.append(type)
        formats.append(1)
        if let bytes {
            offsets.append(storage.count)
            lengths.append(Int32(bytes.count))
            storage += bytes
        } else {
            offsets.append(nil)
            lengths.append(0)
        }
    }

    private static func bigEndianBytes(_ value: UInt64, count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - $0))) }
    }

    /// Calls `body` with the type, value, length and format arrays for PQsendQueryParams
    /// or PQexecParams; the pointers are valid only inside `body`.
    func withArrays<R>(
        _ body: (UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R
    ) -> R {
        storage.withUnsafeBytes { raw in
            let values: [UnsafePointer<CChar>?] = offsets.map { offset in
                guard let offset, let base = raw.baseAddress else { return nil }
                return (base + offset).assumingMemoryBound(to: CChar.self)
            }
            return types.withUnsafeBufferPointer { types in
                values.withUnsafeBufferPointer { values in
                    lengths.withUnsafeBufferPointer { lengths in
                        formats.withUnsafeBufferPointer { formats in
                            body(types.baseAddress, values.baseAddress, lengths.baseAddress, formats.baseAddress)
                        }
                    }
                }
            }
        }
    }

    /// What libpq would refuse or silently truncate, refused up front with a typed error
    /// (and, in a transaction, before any statement of it is sent).
    static func check(_ sql: String, _ parameters: [PostgresValue]) throws(PostgresError) {
        if sql.utf8.contains(0) { throw .violation("the SQL text contains a NUL byte") }
        if parameters.count > maximumCount {
            throw .violation("\(parameters.count) parameters; the protocol allows at most \(maximumCount)")
        }
        for parameter in parameters {
            if case .bytes(let bytes) = parameter, bytes.count > Int(Int32.max) {
                throw .violation("a bytea parameter of \(bytes.count) bytes is over the protocol's limit")
            }
            if case .text(let text) = parameter, text.utf8.count > Int(Int32.max) {
                throw .violation("a text parameter of \(text.utf8.count) bytes is over the protocol's limit")
            }
            if parameter.arrayByteCount > Int(Int32.max) {
                throw .violation("an array parameter of \(parameter.arrayByteCount) bytes is over the protocol's limit")
            }
        }
    }
}

extension PostgresValue {
    /// About the encoded size of an array parameter (0 for a scalar), for the protocol's limit.
    var arrayByteCount: Int {
        switch self {
        case .int64Array(let values): 20 + values.count * 12
        case .int32Array(let values): 20 + values.count * 8
        case .boolArray(let values): 20 + values.count * 5
        case .textArray(let values): values.reduce(20) { $0 + 4 + ($1?.utf8.count ?? 0) }
        case .bytesArray(let values): values.reduce(20) { $0 + 4 + ($1?.count ?? 0) }
        case .null, .int64, .int32, .text, .bytes, .bool: 0
        }
    }
}
