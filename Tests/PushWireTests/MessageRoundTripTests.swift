import Testing
import PushWire

@Suite("Message round trips")
struct MessageRoundTripTests {
    @Test("the samples cover every message type")
    func samplesCoverEveryType() {
        let covered = Set(Samples.all.map(\.type))
        #expect(covered == Set(MessageType.allCases))
    }

    @Test("every message survives encode then decode", arguments: Samples.all.indices)
    func roundTrip(index: Int) throws {
        let message = Samples.all[index]
        let correlation = UInt32(index * 7919 + 1)
        let bytes = message.encoded(correlation: correlation)
        var decoder = FrameDecoder(maxFrame: FrameLimits.ceiling)
        decoder.feed(bytes)
        let frame = try #require(try decoder.next())
        #expect(frame.header.correlation == correlation)
        #expect(frame.header.type == message.type)
        #expect(frame.header.status == message.status)
        #expect(frame.header.frameLength == bytes.count)
        #expect(try Message.decode(frame) == message)
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test("[3.4-1] encoders write fields in ascending tag order", arguments: Samples.all.indices)
    func fieldsAscending(index: Int) throws {
        let bytes = Samples.all[index].encoded(correlation: 1)
        let fields = try bytes.withUnsafeBytes { raw in
            try FieldSet.listAll(in: UnsafeRawBufferPointer(rebasing: raw[FrameHeader.size...]))
        }
        let tags = fields.map(\.tag.rawValue)
        #expect(tags == tags.sorted())
    }

    @Test("[3.4-5] defaults stay off the wire")
    func defaultsOmitted() {
        let plain = Message.push(Push(target: .user("a"), id: [1])).encoded(correlation: 1)
        // header + id(3) + target_kind(3) + target(3)
        #expect(plain.count == FrameHeader.size + 9)
        let store = Message.store(StoreRequest(user: "a", payload: [])).encoded(correlation: 1)
        #expect(store.count == FrameHeader.size + 3 + 2)
    }

    @Test("[4.14-1] the PUSH written to a device drops the target, the TTL, user and once and keeps the options")
    func pushForDevice() throws {
        let push = Push(target: .tag("t"), id: [1, 2], alert: true, priority: 9, collapseKey: "k", ttlSeconds: 5, user: "alice", once: true)
        let device = push.forDevice
        #expect(device.target == nil)
        #expect(device.ttlSeconds == Push.defaultTTLSeconds, "[4.14-1] no ttl_s on the device form")
        #expect(device.user == nil, "[4.14-1] no user on the device form")
        #expect(!device.once, "[4.14-1] no once on the device form")
        #expect(device.id == push.id && device.alert && device.priority == 9 && device.collapseKey == "k")
        // On the wire: id, alert, priority and collapse_key, nothing else.
        let bytes = push.deviceFrame(correlation: 1)
        let tags = try bytes.withUnsafeBytes { raw in
            try FieldSet.listAll(in: UnsafeRawBufferPointer(rebasing: raw[FrameHeader.size...]))
        }.map(\.tag)
        #expect(tags == [.id, .alert, .priority, .collapseKey])
    }

    @Test("[4.14-1] deviceFrame is exactly the encoding of the device form", arguments: [
        Push(target: .tag("t"), id: [1, 2], alert: true, priority: 9, collapseKey: "k", ttlSeconds: 5),
        Push(target: .device("d"), id: Array(repeating: 7, count: 64), ttlSeconds: 0),
        Push(target: .user("u"), id: [3], priority: 0, collapseKey: String(repeating: "c", count: 64)),
        Push(target: nil, id: Array(repeating: 9, count: 200), priority: Push.defaultPriority, collapseKey: ""),
        Push(target: .tag("oncall"), id: [4, 5, 6], alert: true, priority: 10, collapseKey: "inbox", ttlSeconds: 600,
             user: "alice", once: true),
        Push(target: .device("phone-1"), id: [7], user: String(repeating: "u", count: 64)),
    ])
    func deviceFrameMatchesEncoding(push: Push) {
        #expect(push.deviceFrame(correlation: 77) == Message.push(push.forDevice).encoded(correlation: 77))
    }

    @Test("long ERROR texts are cut on a character boundary")
    func errorTextTruncated() throws {
        let long = String(repeating: "é", count: 600)  // 1200 bytes of UTF-8
        let bytes = Message.error(ErrorReply(status: .internalError, message: long)).encoded(correlation: 3)
        var decoder = FrameDecoder()
        decoder.feed(bytes)
        let frame = try #require(try decoder.next())
        guard case .error(let reply) = try Message.decode(frame) else { Issue.record("not an ERROR"); return }
        #expect(reply.message?.utf8.count == 1024)
        #expect(reply.status == .internalError)
    }

    @Test("payload IDs print and parse as 32 hex digits")
    func payloadIDHex() throws {
        let id = PayloadID.random()
        #expect(id.hex.count == 32)
        #expect(PayloadID(hex: id.hex) == id)
        #expect(PayloadID(hex: "xyz") == nil)
        #expect(PayloadID(bytes: id.bytes) == id)
        #expect(PayloadID(bytes: [1, 2, 3]) == nil)
        #expect(PayloadID.random() != PayloadID.random())
    }

    @Test("targets parse from the command-line form")
    func targets() {
        #expect(PushTarget(parsing: "user:alice") == .user("alice"))
        #expect(PushTarget(parsing: "device:d1") == .device("d1"))
        #expect(PushTarget(parsing: "tag:news") == .tag("news"))
        #expect(PushTarget(parsing: "group:x") == nil)
        #expect(PushTarget(parsing: "user:") == nil)
        #expect(PushTarget(parsing: "alice") == nil)
        #expect(PushTarget(parsing: "user:" + String(repeating: "a", count: 65)) == nil)
    }
}
