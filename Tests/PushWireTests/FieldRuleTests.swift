import Testing
import PushWire

@Suite("Field rules")
struct FieldRuleTests {
    static let id16 = Array(repeating: UInt8(0xAA), count: 16)

    func decode(_ type: MessageType, _ body: [UInt8], status: UInt16 = 0) throws(WireError) -> Message {
        let bytes = rawFrame(type: type.rawValue, status: status, body: body)
        var decoder = FrameDecoder()
        decoder.feed(bytes)
        let result = Result { () throws(WireError) -> Message in
            guard let frame = try decoder.next() else { throw .truncatedField }
            return try Message.decode(frame)
        }
        return try result.get()
    }

    @Test("[3.4-2] unknown fields are skipped, wherever they stand")
    func unknownSkipped() throws {
        let body = field(0x7E, [1, 2, 3]) + field(0x13, [9]) + field(0xFF, []) + field(0x15, Self.id16) + field(0x7E, [4])
        let message = try decode(.fetch, body)
        #expect(message == .fetch(Fetch(id: PayloadID(bytes: Self.id16)!, token: [9])))
    }

    @Test("[3.4-3] a known field outside the message's table is skipped")
    func knownButUnlistedSkipped() throws {
        let body = field(0x16, [1, 2, 3]) + field(0x15, Self.id16)
        #expect(try decode(.recall, body) == .recall(Recall(id: PayloadID(bytes: Self.id16)!)))
    }

    @Test("[3.4-4] a duplicate field is BAD_REQUEST")
    func duplicate() {
        let body = field(0x15, Self.id16) + field(0x15, Self.id16)
        #expect(throws: WireError.duplicateField(.id)) { try decode(.recall, body) }
        #expect(WireError.duplicateField(.id).status == .badRequest)
    }

    @Test("[3.4-5] a missing required field is BAD_REQUEST")
    func missing() {
        #expect(throws: WireError.missingField(.user)) { try decode(.login, field(0x11, [1]) + field(0x12, [65])) }
        #expect(throws: WireError.missingField(.id)) { try decode(.fetch, field(0x13, [1])) }
    }

    @Test("[3.3-1] [3.3-2] [3.3-3] [3.3-5] [3.3-6] integer widths, UTF-8, maximum lengths and id sizes are enforced")
    func valueTypes() {
        #expect(throws: WireError.badFieldValue(.maxFrame)) {
            try decode(.hello, field(1, [1]) + field(2, [1]) + field(3, [1]) + field(5, [0, 1]))
        }
        #expect(throws: WireError.badFieldValue(.user)) {
            try decode(.login, field(0x10, [0xC3, 0x28]) + field(0x11, [1]) + field(0x12, [65]))
        }
        #expect(throws: Never.self) { try decode(.login, field(0x10, Array("zoë".utf8)) + field(0x11, [1]) + field(0x12, [65])) }
        #expect(throws: WireError.fieldTooLong(.user, max: 64)) {
            try decode(.login, field(0x10, Array(repeating: 65, count: 65)) + field(0x11, [1]) + field(0x12, [65]))
        }
        #expect(throws: WireError.badFieldValue(.id)) { try decode(.fetch, field(0x15, [1, 2, 3])) }
        #expect(throws: WireError.badFieldValue(.ids)) {
            try decode(.syncOK, field(0x19, Array(repeating: 0, count: 8)) + field(0x1B, [1]) + field(0x1C, [0]))
        }
    }

    @Test("[3.3-4] enumerated values outside their range are BAD_REQUEST")
    func enumRanges() {
        #expect(throws: WireError.badFieldValue(.role)) { try decode(.hello, field(1, [4]) + field(2, [1]) + field(3, [1])) }
        #expect(throws: WireError.badFieldValue(.role)) { try decode(.hello, field(1, [0]) + field(2, [1]) + field(3, [1])) }
        #expect(throws: WireError.badFieldValue(.priority)) { try decode(.push, field(0x15, [1]) + field(0x33, [11])) }
        #expect(throws: WireError.badFieldValue(.alert)) { try decode(.push, field(0x15, [1]) + field(0x32, [2])) }
        #expect(throws: WireError.badFieldValue(.targetKind)) {
            try decode(.push, field(0x15, [1]) + field(0x30, [4]) + field(0x31, [65]))
        }
        #expect(throws: WireError.badFieldValue(.state)) {
            try decode(.statusOK, field(0x14, Array(repeating: 0, count: 8)) + field(0x15, Self.id16) + field(0x1D, [0])
                + field(0x1E, [0, 0, 0, 0]) + field(0x1F, Array(repeating: 0, count: 8)) + field(0x20, Array(repeating: 0, count: 8)))
        }
        // Revision 1.3: once 0/1, push_state 0..2, replayed 0/1.
        #expect(throws: WireError.badFieldValue(.once)) { try decode(.push, field(0x15, [1]) + field(0x3B, [2])) }
        #expect(throws: WireError.badFieldValue(.pushState)) {
            try decode(.statusOK, field(0x14, Array(repeating: 0, count: 8)) + field(0x15, Self.id16) + field(0x1D, [1])
                + field(0x1E, [0, 0, 0, 0]) + field(0x1F, Array(repeating: 0, count: 8)) + field(0x20, Array(repeating: 0, count: 8))
                + field(0x3D, [3]))
        }
        #expect(throws: WireError.badFieldValue(.replayed)) {
            try decode(.sendOK, field(0x14, Array(repeating: 0, count: 8)) + field(0x15, Self.id16) + field(0x3E, [2]))
        }
    }

    @Test("[3.1-3] [3.1-5] broken TLV structure is BAD_REQUEST, not fatal")
    func brokenTLV() {
        #expect(throws: WireError.fieldLengthOverflow) { try decode(.ping, [0x7E, 0x80, 0x80, 0x80, 0x80, 0x01]) }
        #expect(throws: WireError.truncatedField) { try decode(.ping, [0x7E, 0x05, 1, 2]) }
        #expect(throws: WireError.truncatedField) { try decode(.ping, [0x7E]) }
        #expect(!WireError.truncatedField.isFatal)
    }

    @Test("[3.4-6] [4.13-1] PUSH refuses any field outside its table, the payload tag first of all")
    func pushIsStrict() {
        let base = field(0x15, [1, 2]) + field(0x30, [2]) + field(0x31, Array("alice".utf8))
        #expect(throws: WireError.unexpectedField(tag: 0x16, in: .push)) { try decode(.push, base + field(0x16, Array("secret".utf8))) }
        #expect(throws: WireError.unexpectedField(tag: 0x7E, in: .push)) { try decode(.push, base + field(0x7E, [])) }
        #expect(throws: WireError.missingField(.target)) { try decode(.push, field(0x15, [1]) + field(0x30, [2])) }
        #expect(throws: WireError.badFieldValue(.id)) { try decode(.push, field(0x15, [])) }
        // user and once joined the table in revision 1.3; SEND's own fields did not.
        #expect(throws: Never.self) { try decode(.push, field(0x10, Array("alice".utf8)) + base + field(0x3B, [1])) }
        #expect(throws: WireError.unexpectedField(tag: 0x3A, in: .push)) { try decode(.push, base + field(0x3A, [0, 0, 0, 60])) }
        #expect(throws: WireError.unexpectedField(tag: 0x3C, in: .push)) { try decode(.push, base + field(0x3C, Array("k".utf8))) }
    }

    @Test("[2-10] a nonzero status outside ERROR and GOAWAY is BAD_REQUEST")
    func statusOnlyInErrors() throws {
        #expect(throws: WireError.nonzeroStatusInRequest) { try decode(.ping, [], status: 6) }
        #expect(try decode(.error, [], status: 0x15) == .error(ErrorReply(status: .notFound)))
    }

    @Test("[2-4] an unknown message type is a request error")
    func unknownType() {
        #expect(throws: WireError.unknownType(0x7F)) {
            let bytes = rawFrame(type: 0x7F, body: [1, 2, 3])
            var decoder = FrameDecoder()
            decoder.feed(bytes)
            let frame = try #require(try decoder.next())
            _ = try Message.decode(frame)
        }
        #expect(WireError.unknownType(0x7F).status == .unknownType)
        #expect(!WireError.unknownType(0x7F).isFatal)
    }

    @Test("[3.1-2] varints round trip at every width")
    func varints() throws {
        for value in [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, Varint.maxEncodable] {
            var out: [UInt8] = [0x7E]
            Varint.append(value, to: &out)
            out += Array(repeating: 0, count: value > 100_000 ? 0 : value)
            if value <= 100_000 {
                let fields = try out.withUnsafeBytes { try FieldSet.listAll(in: $0) }
                #expect(fields.first?.value.count == value)
            }
        }
    }

    @Test("a field table finds each listed tag, in listing order, and no other, 0xFF and tags above 127 included")
    func fieldTableSlots() {
        let table: FieldTable = [.once, .id, .user, .issuedAt]
        #expect(table.count == 4)
        #expect(table.tags == [.once, .id, .user, .issuedAt])
        for raw in 0...UInt8.max {
            let tag = FieldTag(rawValue: raw)
            #expect(table.contains(tag) == [.once, .id, .user, .issuedAt].contains(tag), "tag \(raw)")
        }
        #expect(Push.fieldTable.tags == [.user, .id, .ttlSeconds, .targetKind, .target, .alert, .priority, .collapseKey, .once])
        #expect(FieldTable([]).count == 0 && FieldTable([]).tags.isEmpty)
    }
}
