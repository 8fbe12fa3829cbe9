/// One message type's body: its field table, how it is read from a scanned body and how
/// its fields are written. Encoders omit optional fields that equal their default.
public protocol WireMessage: Equatable, Sendable {
    static var type: MessageType { get }
    /// The tags this message's table lists; other tags are skipped when read.
    static var fieldTable: FieldTable { get }
    /// True where any tag outside the table is an error rather than skipped (PUSH).
    static var rejectsUnlistedFields: Bool { get }
    init(fields: FieldSet) throws(WireError)
    func writeFields(to writer: inout FieldWriter)
}

extension WireMessage {
    public static var rejectsUnlistedFields: Bool { false }

    /// Reads this message from a frame body that has already been delimited.
    public init(body: UnsafeRawBufferPointer) throws(WireError) {
        let fields = try FieldSet(body: body, allowed: Self.fieldTable, type: Self.type, strict: Self.rejectsUnlistedFields)
        try self.init(fields: fields)
    }
}

/// Messages with no fields (PING, PONG).
public protocol EmptyWireMessage: WireMessage { init() }

extension EmptyWireMessage {
    public static var fieldTable: FieldTable { FieldTable([]) }
    public init(fields: FieldSet) throws(WireError) { self.init() }
    public func writeFields(to writer: inout FieldWriter) {}
}
