import Testing
import PushWire

/// Revision 1.3 in the codec: SEND and SEND_OK, PUSH's `user` and `once`, STATUS_OK's push
/// outcome and the CONFLICT status.
@Suite("SEND, SEND_OK and the revision 1.3 fields")
struct SendMessageTests {
    static let id = PayloadID(high: 0x5E1F_0C2A_9B7D_4E3F, low: 0x8A6B_1C0D_2E4F_6A7B)
    static let u64Zero: [UInt8] = Array(repeating: 0, count: 8)

    private func decode(_ type: MessageType, _ body: [UInt8]) throws(WireError) -> Message {
        var decoder = FrameDecoder()
        decoder.feed(rawFrame(type: type.rawValue, body: body))
        let result = Result { () throws(WireError) -> Message in
            guard let frame = try decoder.next() else { throw .truncatedField }
            return try Message.decode(frame)
        }
        return try result.get()
    }

    private func roundTrip(_ message: Message) throws -> Message {
        var decoder = FrameDecoder(maxFrame: FrameLimits.ceiling)
        decoder.feed(message.encoded(correlation: 9))
        let frame = try #require(try decoder.next())
        return try Message.decode(frame)
    }

    private func tags(_ message: Message) throws -> [FieldTag] {
        let bytes = message.encoded(correlation: 1)
        return try bytes.withUnsafeBytes { raw in
            try FieldSet.listAll(in: UnsafeRawBufferPointer(rebasing: raw[FrameHeader.size...]))
        }.map(\.tag)
    }

    private static let userAlice = field(0x10, Array("alice".utf8))
    private static let payloadHi = field(0x16, Array("hi".utf8))

    // MARK: types, tags, status

    @Test("[2-4] [4.1-1] 0x26 is SEND, a request, and 0x27 SEND_OK, a reply; 0x28 is still unknown")
    func messageTypes() {
        #expect(MessageType(rawValue: 0x26) == .send)
        #expect(MessageType(rawValue: 0x27) == .sendOK)
        #expect(MessageType.send.specName == "SEND" && MessageType.sendOK.specName == "SEND_OK")
        #expect(MessageType.send.isRequest)
        #expect(!MessageType.sendOK.isRequest)
        #expect(MessageType(rawValue: 0x28) == nil)
        #expect(MessageType(specName: "SEND") == .send)
    }

    @Test("[3.2-1] the tags 0x3A to 0x3E have the names, types and maximum lengths of the tag table")
    func tagTable() {
        let expected: [(UInt8, String, FieldTag.ValueType)] = [
            (0x3A, "push_ttl_s", .u32), (0x3B, "once", .u8), (0x3C, "idempotency_key", .identifier(max: 128)),
            (0x3D, "push_state", .u8), (0x3E, "replayed", .u8),
        ]
        for (raw, name, type) in expected {
            let tag = FieldTag(rawValue: raw)
            #expect(tag.isKnown, "\(name)")
            #expect(tag.name == name)
            #expect(tag.valueType == type, "\(name)")
            #expect(FieldTag(name: name) == tag)
        }
        // The next tag is revision 1.4's ([4.9-5]).
        #expect(FieldTag(rawValue: 0x3F).name == "older_count" && FieldTag(rawValue: 0x3F).valueType == .u32)
    }

    @Test("[6-3] CONFLICT is 0x001F, not fatal, and travels in ERROR")
    func conflict() throws {
        #expect(Status.conflict.rawValue == 0x001F)
        #expect(Status.conflict.name == "CONFLICT")
        #expect(Status(name: "CONFLICT") == .conflict)
        #expect(!Status.conflict.isFatal)
        #expect(Status.all.contains(.conflict))
        let error = Message.error(ErrorReply(status: .conflict, message: "idempotency key reused"))
        #expect(try roundTrip(error) == error)
        #expect(error.status == .conflict)
    }

    // MARK: SEND

    @Test("[4.17-1] [4.17-2] [3.4-5] a minimal SEND takes the defaults: ttl_s 86400, read_limit 0, no target, priority 5")
    func minimalSend() throws {
        let decoded = try decode(.send, Self.userAlice + Self.payloadHi)
        let expected = SendRequest(user: "alice", payload: Array("hi".utf8))
        #expect(decoded == .send(expected))
        #expect(expected.ttlSeconds == 86_400 && expected.readLimit == 0 && expected.target == nil)
        #expect(!expected.alert && expected.priority == 5 && expected.collapseKey == nil)
        #expect(expected.pushTTLSeconds == nil && expected.idempotencyKey == nil)
        // Defaults stay off the wire: the minimal SEND encodes back to the same two fields.
        #expect(Message.send(expected).encoded(correlation: 1) == rawFrame(type: 0x26, body: Self.userAlice + Self.payloadHi))
        #expect(expected.storeRequest == StoreRequest(user: "alice", payload: Array("hi".utf8)))
    }

    @Test("[4.17-1] [4.17-3] [4.17-5] [3.4-1] a SEND with every field round trips, its fields in ascending tag order")
    func fullSend() throws {
        let send = SendRequest(user: "alice", payload: Array("Your test results are ready".utf8), ttlSeconds: 3600, readLimit: 1,
                               target: .tag("oncall"), alert: true, priority: 10, collapseKey: "inbox", pushTTLSeconds: 600,
                               idempotencyKey: "results/2023-11-14/alice")
        #expect(try roundTrip(.send(send)) == .send(send))
        #expect(try tags(.send(send)) == [.user, .payload, .ttlSeconds, .readLimit, .targetKind, .target, .alert, .priority,
                                          .collapseKey, .pushTTLSeconds, .idempotencyKey])
        #expect(send.storeRequest == StoreRequest(user: "alice", payload: send.payload, ttlSeconds: 3600, readLimit: 1))
        // Priority 0 and push_ttl_s 0 are values, not absences.
        let low = SendRequest(user: "bob", payload: [1], target: .device("phone-1"), priority: 0, pushTTLSeconds: 0)
        #expect(try roundTrip(.send(low)) == .send(low))
    }

    @Test("[4.17-2] [4.13-1] SEND takes target_kind and target together or not at all, with kinds 1 to 3 only")
    func sendTargetPair() throws {
        let base = Self.userAlice + Self.payloadHi
        #expect(throws: WireError.missingField(.target)) { try decode(.send, base + field(0x30, [2])) }
        #expect(throws: WireError.missingField(.targetKind)) { try decode(.send, base + field(0x31, Array("phone-1".utf8))) }
        #expect(throws: WireError.badFieldValue(.targetKind)) { try decode(.send, base + field(0x30, [4]) + field(0x31, [0x61])) }
        #expect(try decode(.send, base + field(0x30, [1]) + field(0x31, Array("phone-1".utf8)))
            == .send(SendRequest(user: "alice", payload: Array("hi".utf8), target: .device("phone-1"))))
    }

    @Test("[3.4-5] SEND without user or without payload is BAD_REQUEST")
    func sendRequiredFields() {
        #expect(throws: WireError.missingField(.user)) { try decode(.send, Self.payloadHi) }
        #expect(throws: WireError.missingField(.payload)) { try decode(.send, Self.userAlice) }
        #expect(throws: WireError.missingField(.user)) { try decode(.send, []) }
        #expect(WireError.missingField(.payload).status == .badRequest)
    }

    @Test("[3.4-2] [3.4-3] SEND skips unknown fields and other messages' fields unchecked, where PUSH would refuse them")
    func sendSkipsUnlisted() throws {
        // once 2 and a two-byte replayed would be out of range or of the wrong width, but
        // they are not SEND fields; 0x7e is no field at all, and appears twice.
        let body = field(0x7E, [1]) + Self.userAlice + field(0x3B, [2]) + Self.payloadHi + field(0x3E, [0, 1])
            + field(0x15, Array(repeating: 0, count: 70)) + field(0x7E, [])
        #expect(try decode(.send, body) == .send(SendRequest(user: "alice", payload: Array("hi".utf8))))
    }

    @Test("[3.3-3] [4.17-5] idempotency_key is a string of at most 128 bytes")
    func idempotencyKeyLength() throws {
        let base = Self.userAlice + Self.payloadHi
        let longest = String(repeating: "k", count: 128)
        #expect(try decode(.send, base + field(0x3C, Array(longest.utf8)))
            == .send(SendRequest(user: "alice", payload: Array("hi".utf8), idempotencyKey: longest)))
        #expect(throws: WireError.fieldTooLong(.idempotencyKey, max: 128)) {
            try decode(.send, base + field(0x3C, Array(repeating: 0x6B, count: 129)))
        }
        #expect(throws: WireError.badFieldValue(.idempotencyKey)) { try decode(.send, base + field(0x3C, [0xFF])) }
    }

    @Test("[3.4-4] a repeated SEND field is BAD_REQUEST")
    func sendDuplicate() {
        #expect(throws: WireError.duplicateField(.idempotencyKey)) {
            try decode(.send, Self.userAlice + Self.payloadHi + field(0x3C, [0x61]) + field(0x3C, [0x61]))
        }
    }

    // MARK: SEND_OK

    @Test("[4.17-5] SEND_OK round trips plain and replayed; replayed 0 or absent is not replayed")
    func sendOK() throws {
        let plain = SendOK(id: Self.id, expiresAt: 1_700_003_605_000)
        let replayed = SendOK(id: Self.id, expiresAt: 1_700_003_605_000, replayed: true)
        #expect(try roundTrip(.sendOK(plain)) == .sendOK(plain))
        #expect(try roundTrip(.sendOK(replayed)) == .sendOK(replayed))
        #expect(try tags(.sendOK(plain)) == [.expiresAt, .id])
        #expect(try tags(.sendOK(replayed)) == [.expiresAt, .id, .replayed])
        let idField = field(0x15, Self.id.bytes)
        #expect(try decode(.sendOK, field(0x14, Self.u64Zero) + idField + field(0x3E, [0]))
            == .sendOK(SendOK(id: Self.id, expiresAt: 0)))
        #expect(throws: WireError.missingField(.expiresAt)) { try decode(.sendOK, idField) }
    }

    @Test("[3.3-6] SEND_OK's id is a store id of exactly 16 bytes")
    func sendOKStoreID() {
        for length in [0, 15, 17, 64] {
            #expect(throws: WireError.badFieldValue(.id), "\(length) bytes") {
                try decode(.sendOK, field(0x14, Self.u64Zero) + field(0x15, Array(repeating: 1, count: length)))
            }
        }
    }

    // MARK: PUSH's user and once

    @Test("[4.13-11] [4.13-12] PUSH carries user and once and round trips them; once 0 decodes as not once")
    func pushUserAndOnce() throws {
        let push = Push(target: .tag("oncall"), id: Self.id.bytes, alert: true, priority: 10, collapseKey: "inbox", ttlSeconds: 600,
                        user: "alice", once: true)
        #expect(try roundTrip(.push(push)) == .push(push))
        #expect(try tags(.push(push)) == [.user, .id, .ttlSeconds, .targetKind, .target, .alert, .priority, .collapseKey, .once])
        let body = field(0x15, [1]) + field(0x30, [2]) + field(0x31, Array("alice".utf8))
        #expect(try decode(.push, body + field(0x3B, [0])) == .push(Push(target: .user("alice"), id: [1])))
        #expect(try decode(.push, Self.userAlice + body + field(0x3B, [1]))
            == .push(Push(target: .user("alice"), id: [1], user: "alice", once: true)))
        #expect(throws: WireError.badFieldValue(.once)) { try decode(.push, body + field(0x3B, [2])) }
        #expect(throws: WireError.badFieldValue(.once)) { try decode(.push, body + field(0x3B, [0, 1])) }
        #expect(throws: WireError.fieldTooLong(.user, max: 64)) { try decode(.push, field(0x10, Array(repeating: 0x61, count: 65)) + body) }
    }

    @Test("[3.4-6] the strict PUSH table still refuses every field outside it, the 1.3 fields of other messages included")
    func pushStillStrict() {
        let body = field(0x15, [1]) + field(0x30, [2]) + field(0x31, Array("alice".utf8))
        let foreign: [(UInt8, [UInt8])] = [
            (0x3A, [0, 0, 0, 60]), (0x3C, Array("key".utf8)), (0x3D, [1]), (0x3E, [1]),  // SEND, STATUS_OK, SEND_OK
            (0x12, Array("phone-1".utf8)), (0x16, [1]), (0x18, [0, 0, 0, 1]), (0x3F, []), (0x40, Array("news".utf8)),
        ]
        for (tag, value) in foreign {
            #expect(throws: WireError.unexpectedField(tag: tag, in: .push), "tag 0x\(String(tag, radix: 16))") {
                try decode(.push, body + field(tag, value))
            }
        }
    }

    @Test("[4.14-1] the device form keeps nothing of user and once, and its frame is the encoding of that form")
    func deviceFormDropsUserAndOnce() throws {
        let push = Push(target: .user("alice"), id: [1, 2, 3], priority: 7, user: "alice", once: true)
        let device = push.forDevice
        #expect(device == Push(target: nil, id: [1, 2, 3], priority: 7))
        #expect(push.deviceFrame(correlation: 3) == Message.push(device).encoded(correlation: 3))
        #expect(try tags(.push(device)) == [.id, .priority])
    }

    // MARK: STATUS_OK's push outcome

    @Test("[4.12-2] STATUS_OK round trips each push outcome: none leaves the push fields off, waiting is push_state 1, handed adds written and queued")
    func statusOutcomes() throws {
        func status(_ push: PushOutcome) -> Message {
            .statusOK(StatusOK(id: Self.id, state: .fetched, fetchCount: 1, fetchedAt: 7, createdAt: 5, expiresAt: 9, push: push))
        }
        let base: [FieldTag] = [.expiresAt, .id, .state, .fetchCount, .fetchedAt, .createdAt]
        let outcomes: [(PushOutcome, [FieldTag])] = [
            (.none, base),
            (.waiting, base + [.pushState]),
            (.handed(PushAck(written: 2, queued: 1)), base + [.written, .queued, .pushState]),
            (.handed(PushAck(written: 0, queued: 0)), base + [.written, .queued, .pushState]),
            (.handed(PushAck(written: .max, queued: .max)), base + [.written, .queued, .pushState]),
        ]
        for (outcome, expectedTags) in outcomes {
            #expect(try roundTrip(status(outcome)) == status(outcome), "\(outcome)")
            #expect(try tags(status(outcome)) == expectedTags, "\(outcome)")
        }
    }

    @Test("[4.12-2] [3.4-5] push_state 0 is the outcome of STORE, and push_state 2 without written and queued takes their defaults 0")
    func statusOutcomeDefaults() throws {
        let required = field(0x14, Self.u64Zero) + field(0x15, Self.id.bytes) + field(0x1D, [1]) + field(0x1E, [0, 0, 0, 0])
            + field(0x1F, Self.u64Zero) + field(0x20, Self.u64Zero)
        let stored = StatusOK(id: Self.id, state: .stored, fetchCount: 0, fetchedAt: 0, createdAt: 0, expiresAt: 0)
        #expect(try decode(.statusOK, required + field(0x3D, [0])) == .statusOK(stored))
        var handed = stored
        handed.push = .handed(PushAck(written: 0, queued: 0))
        #expect(try decode(.statusOK, required + field(0x3D, [2])) == .statusOK(handed))
        handed.push = .handed(PushAck(written: 3, queued: 0))
        #expect(try decode(.statusOK, required + field(0x35, [0, 0, 0, 3]) + field(0x3D, [2])) == .statusOK(handed))
    }

    @Test("[3.3-4] [3.3-1] push_state above 2, or not one byte, is BAD_REQUEST")
    func statusBadPushState() {
        let required = field(0x14, Self.u64Zero) + field(0x15, Self.id.bytes) + field(0x1D, [1]) + field(0x1E, [0, 0, 0, 0])
            + field(0x1F, Self.u64Zero) + field(0x20, Self.u64Zero)
        #expect(throws: WireError.badFieldValue(.pushState)) { try decode(.statusOK, required + field(0x3D, [3])) }
        #expect(throws: WireError.badFieldValue(.pushState)) { try decode(.statusOK, required + field(0x3D, [0, 2])) }
        #expect(throws: WireError.badFieldValue(.written)) { try decode(.statusOK, required + field(0x35, [2]) + field(0x3D, [2])) }
    }

    @Test("[3.3-2] [3.3-3] [3.3-4] [3.3-8] a SEND checked as a value meets the limits its frame meets, with the same error")
    func valueChecksAreTheWires() throws {
        let long = String(repeating: "u", count: 65)
        let sends = [
            SendRequest(user: "alice", payload: [1, 2]),
            SendRequest(user: long, payload: []),
            SendRequest(user: "a\u{0}b", payload: []),
            SendRequest(user: "a\u{85}b", payload: []),
            SendRequest(user: "zoë", payload: [], target: .device(long)),
            SendRequest(user: "a", payload: [], target: .tag("t\u{7F}")),
            SendRequest(user: "a", payload: [], priority: 11),
            SendRequest(user: "a", payload: [], priority: 10, collapseKey: String(repeating: "c", count: 64)),
            SendRequest(user: "a", payload: [], collapseKey: String(repeating: "c", count: 65)),
            SendRequest(user: "a", payload: [], idempotencyKey: String(repeating: "k", count: 128)),
            SendRequest(user: "a", payload: [], idempotencyKey: String(repeating: "k", count: 129)),
            SendRequest(user: "a", payload: [], idempotencyKey: "k\n"),
        ]
        for send in sends {
            var writer = FieldWriter()
            send.writeFields(to: &writer)
            let decoded = writer.bytes.withUnsafeBytes { body in Result { () throws(WireError) in try SendRequest(body: body) } }
            let checked = Result { () throws(WireError) in try send.validate() }
            switch (decoded, checked) {
            case (.success(let read), .success): #expect(read == send)
            case (.failure(let wire), .failure(let value)): #expect(wire == value, "\(send)")
            default: Issue.record("the frame and the value disagree on \(send): \(decoded) against \(checked)")
            }
        }
    }
}
