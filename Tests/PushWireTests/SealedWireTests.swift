import PushWire
import Testing

/// The wire vocabulary of sealed payloads: LOGIN's key, KEYS and KEYS_OK, the three content
/// forms of STORE and SEND, FETCH_OK's view, and the sealed format's structure (7.6).
@Suite struct SealedWireTests {
    private func roundTrip(_ message: Message) throws -> Message {
        var decoder = FrameDecoder(maxFrame: 1 << 20)
        decoder.feed(message.encoded(correlation: 9))
        return try Message.decode(try #require(try decoder.next()))
    }

    private func decode(_ type: MessageType, _ fields: [(FieldTag, [UInt8])]) throws(WireError) -> Message {
        var writer = FieldWriter()
        for (tag, value) in fields { writer.append(tag, value) }
        let header = FrameHeader(type: type, correlation: 1, bodyLength: UInt32(writer.bytes.count))
        return try Message.decode(Frame(header: header, body: writer.bytes))
    }

    private let key = DevicePublicKey(suite: .x25519, bytes: [UInt8](repeating: 7, count: 32))

    /// [4.6-5] LOGIN carries the key, LOGIN_OK its id.
    @Test func loginCarriesKey() throws {
        let login = Login(user: "alice", password: Array("pw".utf8), deviceID: "phone", deviceKey: key)
        #expect(try roundTrip(.login(login)) == .login(login))
        let ok = LoginOK(token: [1, 2, 3], expiresAt: 5, keyID: KeyID(value: 0x0102_0304_0506_0708))
        #expect(try roundTrip(.loginOK(ok)) == .loginOK(ok))
    }

    /// [4.6-6] `key_suite` and `device_key` come together, with the suite's length.
    @Test func loginKeyRules() {
        let base: [(FieldTag, [UInt8])] = [(.user, Array("a".utf8)), (.password, [1]), (.deviceID, Array("d".utf8))]
        #expect(throws: WireError.missingField(.deviceKey)) { try decode(.login, base + [(.keySuite, [1])]) }
        #expect(throws: WireError.missingField(.keySuite)) { try decode(.login, base + [(.deviceKey, [UInt8](repeating: 1, count: 32))]) }
        #expect(throws: WireError.badFieldValue(.deviceKey)) { try decode(.login, base + [(.keySuite, [2]), (.deviceKey, [UInt8](repeating: 1, count: 32))]) }
        #expect(throws: WireError.badFieldValue(.keySuite)) { try decode(.login, base + [(.keySuite, [3]), (.deviceKey, [UInt8](repeating: 1, count: 32))]) }
        #expect(throws: WireError.fieldTooLong(.deviceKey, max: 1216)) { try decode(.login, base + [(.keySuite, [2]), (.deviceKey, [UInt8](repeating: 1, count: 1217))]) }
        #expect(WireError.missingField(.deviceKey).status == .badRequest)
    }

    /// [4.18-2] KEYS_OK packs entries back to back; a value that does not divide is malformed.
    @Test func keysOKPacking() throws {
        let xwing = DevicePublicKey(suite: .xwing, bytes: [UInt8](repeating: 3, count: 1216))
        let ok = KeysOK(cursor: 42, keys: [
            DeviceKeyEntry(deviceID: "phone", key: key, keyID: KeyID(value: 1)),
            DeviceKeyEntry(deviceID: "tablet", key: xwing, keyID: KeyID(value: 2)),
        ])
        #expect(try roundTrip(.keysOK(ok)) == .keysOK(ok))
        var packed: [UInt8] = []
        ok.keys[0].write(into: &packed)
        #expect(packed.count == ok.keys[0].packedCount)
        #expect(throws: WireError.badFieldValue(.keys)) { try decode(.keysOK, [(.cursor, [0, 0, 0, 0, 0, 0, 0, 1]), (.keys, Array(packed.dropLast()))]) }
        var wrongSuite = packed
        wrongSuite[6] = 9
        #expect(throws: WireError.badFieldValue(.keys)) { try decode(.keysOK, [(.cursor, [0, 0, 0, 0, 0, 0, 0, 1]), (.keys, wrongSuite)]) }
        #expect(try roundTrip(.keys(Keys(user: "alice"))) == .keys(Keys(user: "alice")))
    }

    /// [4.19] STORE and SEND carry exactly one of `payload`, `sealed_payload`, `payload_to_seal`.
    @Test func contentForms() throws {
        for form in PayloadForm.allCases {
            let store = StoreRequest(user: "alice", payload: [1, 2], form: form)
            #expect(try roundTrip(.store(store)) == .store(store))
            let send = SendRequest(user: "alice", payload: [1, 2], form: form, idempotencyKey: "k")
            #expect(try roundTrip(.send(send)) == .send(send))
        }
        #expect(throws: WireError.exclusiveFields(.payload, .sealedPayload)) {
            try decode(.store, [(.user, Array("a".utf8)), (.payload, [1]), (.sealedPayload, [1])])
        }
        #expect(throws: WireError.exclusiveFields(.sealedPayload, .payloadToSeal)) {
            try decode(.send, [(.user, Array("a".utf8)), (.payloadToSeal, [1]), (.sealedPayload, [1])])
        }
        #expect(throws: WireError.missingField(.payload)) { try decode(.store, [(.user, Array("a".utf8))]) }
    }

    /// [4.19-4] FETCH_OK carries the content as `payload` or as `sealed_payload`, never both.
    @Test func fetchOKForms() throws {
        let view = FetchOK(id: PayloadID(high: 1, low: 2), payload: [9], sealed: true, createdAt: 1, expiresAt: 2)
        #expect(try roundTrip(.fetchOK(view)) == .fetchOK(view))
        let id = PayloadID(high: 1, low: 2).bytes
        #expect(throws: WireError.exclusiveFields(.payload, .sealedPayload)) {
            try decode(.fetchOK, [(.expiresAt, [0, 0, 0, 0, 0, 0, 0, 1]), (.id, id), (.payload, [1]), (.sealedPayload, [1]), (.createdAt, [0, 0, 0, 0, 0, 0, 0, 1])])
        }
        let ok = StoreOK(id: PayloadID(high: 1, low: 2), expiresAt: 3, cursor: 17)
        #expect(try roundTrip(.storeOK(ok)) == .storeOK(ok))
        let sendOK = SendOK(id: PayloadID(high: 1, low: 2), expiresAt: 3, cursor: 17)
        #expect(try roundTrip(.sendOK(sendOK)) == .sendOK(sendOK))
    }

    private func sealed(_ stanzas: [SealedPayload.Stanza], body: [UInt8] = [UInt8](repeating: 0, count: 20)) -> SealedPayload {
        SealedPayload(sealNonce: [UInt8](repeating: 5, count: 16), stanzas: stanzas, body: body)
    }

    private func stanza(_ id: UInt64, _ suite: KeySuite = .x25519) -> SealedPayload.Stanza {
        .init(suite: suite, keyID: KeyID(value: id), encapsulatedKey: [UInt8](repeating: 1, count: suite.encapsulatedKeyCount),
              wrappedKey: [UInt8](repeating: 2, count: 48))
    }

    /// [4.19-1] The structure check; [4.19-4] a device's view holds its stanza alone.
    @Test func sealedStructure() throws {
        let payload = sealed([stanza(1), stanza(2, .xwing), stanza(3)])
        #expect(payload.bytes.count == 18 + 89 * 2 + 1177 + 20)
        #expect(try SealedPayload(parsing: payload.bytes) == payload)
        #expect(payload.deviceView(for: KeyID(value: 2)) == sealed([stanza(2, .xwing)]))
        #expect(payload.deviceView(for: KeyID(value: 4)) == nil)
        // The store's copy-free forms agree with the parsed ones.
        #expect(try SealedPayload.check(payload.bytes) == ArraySlice(payload.sealNonce))
        for id in [1, 2, 3] as [UInt64] {
            #expect(SealedPayload.deviceView(of: payload.bytes, for: KeyID(value: id)) == payload.deviceView(for: KeyID(value: id))?.bytes)
        }
        #expect(SealedPayload.deviceView(of: payload.bytes, for: KeyID(value: 4)) == nil)
        #expect(throws: SealedPayloadError.duplicateKeyID(KeyID(value: 1))) { try SealedPayload.check(sealed([stanza(1), stanza(1)]).bytes) }

        var bytes = payload.bytes
        bytes[0] = 2
        #expect(throws: SealedPayloadError.unsupportedVersion(2)) { try SealedPayload(parsing: bytes) }
        #expect(throws: SealedPayloadError.noStanza) { try SealedPayload(parsing: sealed([]).bytes) }
        #expect(throws: SealedPayloadError.duplicateKeyID(KeyID(value: 1))) { try SealedPayload(parsing: sealed([stanza(1), stanza(1)]).bytes) }
        #expect(throws: SealedPayloadError.bodyTooShort) { try SealedPayload(parsing: sealed([stanza(1)], body: [1]).bytes) }
        #expect(throws: SealedPayloadError.truncated) { try SealedPayload(parsing: Array(payload.bytes.prefix(60))) }
        bytes = sealed([stanza(1)]).bytes
        bytes[18] = 3
        #expect(throws: SealedPayloadError.unknownSuite(3)) { try SealedPayload(parsing: bytes) }
    }
}
