/// Everything the codec can reject, each mapped to the status the peer is told.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    // Framing faults: the byte stream can no longer be trusted; fatal.
    case badMagic(UInt8)
    case unsupportedVersion(UInt8)
    case reservedBitsSet
    case frameTooLarge(length: UInt32, max: Int)
    // Body faults: the frame was delimited correctly; the request fails, the connection lives.
    case unknownType(UInt8)
    case truncatedField
    case fieldLengthOverflow
    case duplicateField(FieldTag)
    case missingField(FieldTag)
    /// Two fields of which a message carries at most one.
    case exclusiveFields(FieldTag, FieldTag)
    case badFieldValue(FieldTag)
    /// A control character in an identifier field ([3.3-8]).
    case controlCharacter(FieldTag)
    case fieldTooLong(FieldTag, max: Int)
    case unexpectedField(tag: UInt8, in: MessageType)
    case nonzeroStatusInRequest

    public var status: Status {
        switch self {
        case .badMagic, .reservedBitsSet: .malformedFrame
        case .unsupportedVersion: .unsupportedVersion
        case .frameTooLarge: .frameTooLarge
        case .unknownType: .unknownType
        case .truncatedField, .fieldLengthOverflow, .duplicateField, .missingField, .exclusiveFields, .badFieldValue, .controlCharacter,
             .fieldTooLong, .unexpectedField, .nonzeroStatusInRequest:
            .badRequest
        }
    }

    public var isFatal: Bool { status.isFatal }

    public var description: String {
        switch self {
        case .badMagic(let byte): "bad magic byte 0x\(String(byte, radix: 16))"
        case .unsupportedVersion(let version): "unsupported protocol version \(version)"
        case .reservedBitsSet: "reserved header bits set"
        case .frameTooLarge(let length, let max): "frame body of \(length) bytes exceeds the \(max)-byte frame limit"
        case .unknownType(let type): "unknown message type 0x\(String(type, radix: 16))"
        case .truncatedField: "field runs past the end of the body"
        case .fieldLengthOverflow: "field length longer than 4 varint bytes"
        case .duplicateField(let tag): "duplicate field \(tag)"
        case .missingField(let tag): "missing required field \(tag)"
        case .exclusiveFields(let first, let second): "fields \(first) and \(second) exclude each other"
        case .badFieldValue(let tag): "malformed value in field \(tag)"
        case .controlCharacter(let tag): "field \(tag) contains a control character"
        case .fieldTooLong(let tag, let max): "field \(tag) longer than \(max) bytes"
        case .unexpectedField(let tag, let type): "field 0x\(String(tag, radix: 16)) is not allowed in \(type)"
        case .nonzeroStatusInRequest: "request carries a nonzero status"
        }
    }
}
