import Testing
import PushWire

@Suite("REGISTRY and REGISTRY_OK")
struct RegistryMessageTests {
    private func registryOK(_ packed: [UInt8]) throws(WireError) -> Message {
        let body = field(0x19, [0, 0, 0, 0, 0, 0, 0, 9]) + field(0x1C, [0]) + field(0x39, packed)
        var decoder = FrameDecoder()
        decoder.feed(rawFrame(type: MessageType.registryOK.rawValue, status: 0, body: body))
        let result = Result { () throws(WireError) -> Message in
            guard let frame = try decoder.next() else { throw .truncatedField }
            return try Message.decode(frame)
        }
        return try result.get()
    }

    @Test("[4.16-2] registrations pack state, a big-endian u16 length and the credential, entry after entry")
    func packing() throws {
        let decoded = try registryOK([1, 0, 2, 0xAA, 0xBB, 2, 0, 1, 0xCC])
        #expect(decoded == .registryOK(RegistryOK(entries: [RegistryEntry(state: .enrolled, credential: [0xAA, 0xBB]),
                                                            RegistryEntry(state: .revoked, credential: [0xCC])],
                                                  cursor: 9, hasMore: false)))
        #expect(try registryOK([]) == .registryOK(RegistryOK(entries: [], cursor: 9, hasMore: false)))
    }

    @Test("[3.3-7] [4.16-2] a bad state, a zero or cut-off length, or a stray byte is BAD_REQUEST on the field")
    func badPacking() {
        for packed: [UInt8] in [[3, 0, 1, 0xAA], [0, 0, 1, 0xAA], [1, 0, 0], [1, 0, 2, 0xAA], [1, 0], [1, 0, 1, 0xAA, 2],
                                [1, 0x04, 0x01] + Array(repeating: 0, count: 1025)] {
            #expect(throws: WireError.badFieldValue(.registrations), "\(packed.prefix(8))") { try registryOK(packed) }
        }
    }

    @Test("[3.3-7] an entry may be up to 1024 bytes long, the credential field's limit")
    func longestEntry() throws {
        let credential = Array(repeating: UInt8(0x5A), count: 1024)
        let decoded = try registryOK([2, 0x04, 0x00] + credential)
        #expect(decoded == .registryOK(RegistryOK(entries: [RegistryEntry(state: .revoked, credential: credential)],
                                                  cursor: 9, hasMore: false)))
    }

    @Test("[4.16-4] [4.16-8] limit and wait_ms decode as sent, however large: clamping them is the store's rule, not the decoder's")
    func requestValuesAsSent() throws {
        let body = field(0x19, [0, 0, 0, 0, 0, 0, 0, 42]) + field(0x1A, [0xFF, 0xFF, 0xFF, 0xFF]) + field(0x38, [0xFF, 0xFF, 0xFF, 0xFF])
        var decoder = FrameDecoder()
        decoder.feed(rawFrame(type: MessageType.registry.rawValue, status: 0, body: body))
        let frame = try #require(try decoder.next())
        #expect(try Message.decode(frame) == .registry(RegistryRequest(cursor: 42, limit: .max, waitMs: .max)))
        var empty = FrameDecoder()
        empty.feed(rawFrame(type: MessageType.registry.rawValue, status: 0, body: []))
        let defaults = try #require(try empty.next())
        #expect(try Message.decode(defaults) == .registry(RegistryRequest(cursor: 0, limit: 200, waitMs: 0)), "[4.16-1] defaults")
    }

    @Test("[4.16-4] a REGISTRY_OK with the longest registration (896 bytes, [7.4-3]) fits the smallest maximum frame, 1024")
    func oneEntryAlwaysFits() {
        let reply = Message.registryOK(RegistryOK(entries: [RegistryEntry(state: .enrolled, credential: Array(repeating: 1, count: 896))],
                                                  cursor: .max, hasMore: true))
        #expect(reply.encoded(correlation: .max).count <= FrameLimits.floor)
    }
}
