import Foundation
@testable import PushStoreLogic
@testable import PushStoreSQLite
import PushSealing
import PushSecurity
import PushWire
import Testing
@testable import PushStore

/// Sealed payloads built without cryptography: the store only checks their structure and
/// cuts views, so made-up stanzas with real key ids serve (SPEC.md 7.6).
enum SealedSamples {
    /// A public key of `suite`'s length whose bytes follow from `seed`.
    /// A real public key, the same for the same seed: the store refuses what swift-crypto
    /// does not take ([4.6-6]), an X-Wing key of made-up bytes among them.
    static func key(_ seed: UInt8, suite: KeySuite = .x25519) -> DevicePublicKey {
        let privateKey = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &* 7 &+ 9) }
        // Test data: 32 bytes are a valid private key of either suite.
        return try! DeviceKeyPair(suite: suite, privateKey: privateKey).devicePublicKey
    }

    static func keyID(_ key: DevicePublicKey, device: String) -> KeyID {
        SealedNames.keyID(suite: key.suite, deviceID: device, publicKey: key.bytes)
    }

    static func stanza(_ keyID: KeyID, suite: KeySuite = .x25519, fill: UInt8 = 0x5A) -> SealedPayload.Stanza {
        SealedPayload.Stanza(suite: suite, keyID: keyID, encapsulatedKey: Array(repeating: fill, count: suite.encapsulatedKeyCount),
                             wrappedKey: Array(repeating: fill &+ 1, count: SealedPayload.wrappedKeyCount))
    }

    /// A well-formed sealed payload to these key ids, its nonce from `nonce`.
    static func payload(nonce: UInt8, to keyIDs: [KeyID], body: String = "sealed body, opaque to the store") -> SealedPayload {
        SealedPayload(sealNonce: Array(repeating: nonce, count: SealedPayload.sealNonceCount),
                      stanzas: keyIDs.enumerated().map { stanza($1, fill: UInt8(truncatingIfNeeded: $0 * 2)) }, body: Array(body.utf8))
    }

    /// Sealed payloads that break 7.6-6, each a different way.
    static var malformed: [(String, [UInt8])] {
        let good = payload(nonce: 1, to: [KeyID(value: 1)]).bytes
        var version = good
        version[0] = 2
        var noStanza = Array(good[0..<17])
        noStanza.append(0)
        noStanza += Array(repeating: 0, count: 20)
        var unknownSuite = good
        unknownSuite[18] = 9
        let twice = SealedPayload(sealNonce: Array(repeating: 1, count: 16), stanzas: [stanza(KeyID(value: 1)), stanza(KeyID(value: 1))],
                                  body: Array(repeating: 0, count: 16)).bytes
        return [("version 2", version), ("no stanza", noStanza), ("unknown suite", unknownSuite), ("a key id twice", twice),
                ("a body under 16 bytes", Array(good.dropLast(good.count - 18 - 89 - 15))), ("cut inside a stanza", Array(good[0..<40]))]
    }
}

extension StoreFixture {
    func login(_ user: String = "alice", device: String, key: DevicePublicKey?) throws -> Message? {
        try send(.login(Login(user: user, password: Array("pw-\(user)".utf8), deviceID: device, deviceKey: key)), on: session(.device))
    }

    func keys(_ user: String = "alice", maxFrame: Int = FrameLimits.defaultMaxFrame) throws -> Message? {
        let session = session(.provider)
        session.maxFrame = maxFrame
        return try send(.keys(Keys(user: user)), on: session)
    }

    /// LOGIN with `key` (enrolling the device first unless it is): its token.
    func keyedToken(_ device: String, key: DevicePublicKey?, user: String = "alice") throws -> [UInt8] {
        if try registry().enrolled(deviceID: device)?.user != user { try enroll(device, user: user) }
        guard case .loginOK(let ok)? = try login(user, device: device, key: key) else { throw StoreTestError.unexpected(nil) }
        return ok.token
    }

    func storeSealed(_ sealed: [UInt8], for user: String = "alice") throws -> Message? {
        try send(.store(StoreRequest(user: user, payload: sealed, form: .sealed)), on: session(.provider))
    }

    func registrySequence() throws -> UInt64 { try registry().lastChange() }

    /// Registrations whose device key columns hold anything, enrolled or revoked.
    func keyedRows() throws -> Int64 {
        let connection = try SQLitePayloadDatabase.open(path: directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path)
        return try connection.integer("SELECT count(*) FROM registrations WHERE key_suite IS NOT NULL OR device_key IS NOT NULL OR key_id IS NOT NULL") ?? -1
    }
}

func keysOK(_ message: Message?) -> KeysOK? {
    if case .keysOK(let ok)? = message { return ok }
    return nil
}

@Suite("Store logic: device keys, KEYS and sealed payloads")
struct SealedStoreLogicTests {
    @Test("[4.6-5] [4.6-8] a LOGIN with a key registers it durably before LOGIN_OK, which names its key id; [4.6-7] a LOGIN without one keeps it")
    func loginRegistersTheKey() throws {
        let store = try StoreFixture()
        try store.enroll("phone")
        let key = SealedSamples.key(1)
        let expected = SealedSamples.keyID(key, device: "phone")
        guard case .loginOK(let ok)? = try store.login(device: "phone", key: key) else { Issue.record("login failed"); return }
        #expect(ok.keyID == expected)
        // Durable: another connection, as another process, reads it.
        #expect(try SQLitePayloadReader(path: store.directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path)
            .enrolledDevice("phone")?.keyID == expected)
        guard case .loginOK(let again)? = try store.login(device: "phone", key: nil) else { Issue.record("login failed"); return }
        #expect(again.keyID == expected, "a LOGIN without a key leaves the registered one, and LOGIN_OK names it")
        try store.enroll("tablet")
        guard case .loginOK(let none)? = try store.login(device: "tablet", key: nil) else { Issue.record("login failed"); return }
        #expect(none.keyID == nil, "no key registered, none named")
    }

    @Test("[4.6-5] [4.16-5] a new key replaces the old with a new change number, which REGISTRY lists again; the same key commits nothing")
    func newKeyReplacesAndMovesTheCursor() throws {
        let store = try StoreFixture()
        try store.enroll("phone")
        _ = try store.login(device: "phone", key: SealedSamples.key(1))
        let afterFirst = try store.registrySequence()
        _ = try store.login(device: "phone", key: SealedSamples.key(1))
        #expect(try store.registrySequence() == afterFirst, "the same key again: no change")
        let second = SealedSamples.key(2)
        guard case .loginOK(let ok)? = try store.login(device: "phone", key: second) else { Issue.record("login failed"); return }
        #expect(ok.keyID == SealedSamples.keyID(second, device: "phone"))
        #expect(try store.registrySequence() == afterFirst + 1)
        let page = registryOK(try store.registry(cursor: afterFirst))
        #expect(page?.entries.count == 1 && page?.entries.first?.state == .enrolled && page?.cursor == afterFirst + 1,
                "the re-keyed registration is listed again, still enrolled")
        #expect(keysOK(try store.keys())?.keys.map(\.keyID) == [SealedSamples.keyID(second, device: "phone")])
    }

    @Test("[4.6-5] a key change whose registration was revoked meanwhile commits nothing and the LOGIN fails as 4.6-4 says")
    func keyForARevokedRegistration() throws {
        let store = try StoreFixture()
        let registration = try store.enroll("phone")
        try store.revoke("phone")
        let change = DeviceKeyChange(deviceID: "phone", issuedAt: registration.issuedAt, key: SealedSamples.key(1))
        let before = try store.registrySequence()
        #expect(try store.writer.commit([.deviceKey(change)]) == [.failed(.badCredentials)])
        #expect(try store.registrySequence() == before)
        #expect(status(of: CommittedReply.loginOK(LoginOK(token: [1], expiresAt: 1)).message(for: .failed(.badCredentials))) == .badCredentials)
    }

    @Test("[4.16-6] [4.18-1] revoking a device, or removing its user, deletes its key in the same commit: the next KEYS lists it no more")
    func revocationDeletesTheKey() throws {
        let store = try StoreFixture()
        _ = try store.keyedToken("phone", key: SealedSamples.key(1))
        _ = try store.keyedToken("tablet", key: SealedSamples.key(2))
        #expect(keysOK(try store.keys())?.keys.map(\.deviceID) == ["phone", "tablet"])
        try store.revoke("phone")
        #expect(keysOK(try store.keys())?.keys.map(\.deviceID) == ["tablet"])
        #expect(try store.keyedRows() == 1, "the revoked row keeps no key")
        try store.enroll("phone")
        #expect(keysOK(try store.keys())?.keys.map(\.deviceID) == ["tablet"], "enrolled again: no key until it logs in")
        #expect(try store.writer.removeUser("alice"))
        #expect(try store.keyedRows() == 0)
        #expect(status(of: try store.keys()) == .unknownUser)
    }

    @Test("[4.18-1] [4.18-3] KEYS lists enrolled, unexpired, keyed devices in device id byte order, with the user's key cursor; an unknown user is UNKNOWN_USER")
    func keysOrderAndCursor() throws {
        let store = try StoreFixture()
        #expect(keysOK(try store.keys()) == KeysOK(cursor: 0, keys: []), "no registry entry: cursor 0")
        // Byte order: "Z" (0x5A) before "a" before "é" (0xC3 0xA9).
        for (seed, device) in ["é-phone", "a-phone", "Z-phone"].enumerated() {
            _ = try store.keyedToken(device, key: SealedSamples.key(UInt8(seed), suite: seed == 1 ? .xwing : .x25519))
        }
        try store.enroll("keyless")
        try store.enroll("short-lived", lifetimeMs: 10_000)
        _ = try store.login(device: "short-lived", key: SealedSamples.key(9))
        _ = try store.keyedToken("bobs", key: SealedSamples.key(8), user: "bob")
        store.now += 10_000
        let listed = try #require(keysOK(try store.keys()))
        #expect(listed.keys.map(\.deviceID) == ["Z-phone", "a-phone", "é-phone"])
        #expect(listed.keys.map(\.key.suite) == [.x25519, .xwing, .x25519])
        #expect(listed.keys.allSatisfy { $0.keyID == SealedSamples.keyID($0.key, device: $0.deviceID) })
        let aliceLast = try store.registry().list(user: "alice").map(\.changeSequence).max()
        #expect(listed.cursor == aliceLast, "the greatest change number among alice's entries, bob's later one not")
        try store.revoke("keyless")
        #expect(keysOK(try store.keys())?.cursor == (try store.registrySequence()), "a revocation moves it")
        #expect(status(of: try store.keys("nobody")) == .unknownUser)
    }

    @Test("[4.18-6] a KEYS_OK larger than the connection's max_frame is answered TOO_LARGE")
    func keysTooLarge() throws {
        let store = try StoreFixture()
        _ = try store.keyedToken("phone", key: SealedSamples.key(1, suite: .xwing))
        #expect(status(of: try store.keys(maxFrame: 1024)) == .tooLarge, "one 1236-byte entry does not fit 1024")
        #expect(keysOK(try store.keys(maxFrame: 2048))?.keys.count == 1)
    }

    @Test("[4.19-1] a malformed sealed_payload is BAD_REQUEST in STORE and SEND, to a known user or an unknown one")
    func malformedSealedPayloads() throws {
        var settings = StoreSettings()
        settings.forwardsPushes = true
        let store = try StoreFixture(settings: settings)
        for (why, bytes) in SealedSamples.malformed {
            #expect(status(of: try store.storeSealed(bytes)) == .badRequest, "\(why)")
            #expect(status(of: try store.storeSealed(bytes, for: "nobody")) == .badRequest, "\(why), to an unknown user")
            let send = SendRequest(user: "nobody", payload: bytes, form: .sealed, idempotencyKey: "k-\(why)")
            #expect(status(of: try store.send(.send(send), on: store.session(.provider))) == .badRequest, "\(why), SEND")
        }
        #expect(status(of: try store.storeSealed(SealedSamples.payload(nonce: 1, to: [KeyID(value: 1)]).bytes, for: "nobody")) == .unknownUser)
    }

    @Test("[4.19-2] [4.18-5] a sealed payload's id is derived from its seal nonce, a second with that id is CONFLICT, and STORE_OK carries the key cursor")
    func sealedIDsAndConflict() throws {
        let store = try StoreFixture()
        _ = try store.keyedToken("phone", key: SealedSamples.key(1))
        let sealed = SealedSamples.payload(nonce: 7, to: [SealedSamples.keyID(SealedSamples.key(1), device: "phone")])
        guard case .storeOK(let ok)? = try store.storeSealed(sealed.bytes) else { Issue.record("not stored"); return }
        #expect(ok.id == SealedNames.payloadID(sealNonce: sealed.sealNonce))
        #expect(ok.cursor == (try store.registrySequence()))
        #expect(status(of: try store.storeSealed(sealed.bytes)) == .conflict)
        var other = sealed
        other.body = Array("other text".utf8) + Array(repeating: 0, count: 16)
        #expect(status(of: try store.storeSealed(other.bytes, for: "bob")) == .conflict, "the same nonce, whatever else differs")
        guard case .storeOK(let plain)? = try store.send(.store(StoreRequest(user: "alice", payload: Array("plain".utf8))), on: store.session(.provider)) else {
            Issue.record("plain STORE failed"); return
        }
        #expect(plain.cursor == nil, "a plain payload's STORE_OK has no cursor")
    }

    @Test("[4.19-4] a store started again over the file knows which payloads are sealed (kept in memory with their row numbers)")
    func sealedAfterRestart() throws {
        let store = try StoreFixture()
        guard case .storeOK(let sealed)? = try store.storeSealed(SealedSamples.payload(nonce: 4, to: [KeyID(value: 5)]).bytes) else {
            Issue.record("not stored"); return
        }
        let plain = try store.store("plain")
        let path = store.directory.appendingPathComponent(SQLitePayloadDatabase.fileName).path
        let restarted = try SQLiteStoreReads(reader: SQLitePayloadReader(path: path), recheckMs: 0, clock: { store.now })
        #expect(try restarted.payload(sealed.id, withBody: false)?.sealed == true)
        #expect(try restarted.payload(plain, withBody: false)?.sealed == false)
    }

    @Test("[4.17-5] [4.19-2] a keyed sealed SEND sent again is answered as a replay, not CONFLICT; other content under the key is CONFLICT")
    func sealedSendReplay() throws {
        var settings = StoreSettings()
        settings.forwardsPushes = true
        let store = try StoreFixture(settings: settings)
        let sealed = SealedSamples.payload(nonce: 3, to: [KeyID(value: 42)]).bytes
        let send = SendRequest(user: "alice", payload: sealed, form: .sealed, idempotencyKey: "order-1")
        guard case .sendOK(let first)? = try store.send(.send(send), on: store.session(.provider)) else { Issue.record("not sent"); return }
        #expect(first.cursor == 0, "alice has no registry entry yet")
        guard case .sendOK(let again)? = try store.send(.send(send), on: store.session(.provider)) else { Issue.record("no replay"); return }
        #expect(again.replayed && again.id == first.id)
        var plainTwin = send
        plainTwin.form = .plain
        #expect(status(of: try store.send(.send(plainTwin), on: store.session(.provider))) == .conflict,
                "the same bytes as a plain payload are other content")
        var unkeyed = send
        unkeyed.idempotencyKey = nil
        #expect(status(of: try store.send(.send(unkeyed), on: store.session(.provider))) == .conflict)
    }

    @Test("[4.19-4] [4.8-1] FETCH of a sealed payload hands the device's view with its own stanza alone; a device without a stanza or without a key gets NOT_SEALED_FOR_DEVICE, not counted as a fetch")
    func fetchHandsTheView() throws {
        let store = try StoreFixture()
        let phoneKey = SealedSamples.key(1), tabletKey = SealedSamples.key(2)
        let phone = try store.keyedToken("phone", key: phoneKey)
        let tablet = try store.keyedToken("tablet", key: tabletKey)
        let sealed = SealedSamples.payload(nonce: 9, to: [SealedSamples.keyID(phoneKey, device: "phone"),
                                                          SealedSamples.keyID(tabletKey, device: "tablet")])
        guard case .storeOK(let stored)? = try store.storeSealed(sealed.bytes) else { Issue.record("not stored"); return }
        let late = try store.keyedToken("laptop", key: SealedSamples.key(3))
        let keyless = try store.keyedToken("watch", key: nil)
        let device = store.session(.device)
        for (token, key, name) in [(phone, phoneKey, "phone"), (tablet, tabletKey, "tablet")] {
            guard case .fetchOK(let ok)? = try store.send(.fetch(Fetch(id: stored.id, token: token)), on: device) else {
                Issue.record("\(name) could not fetch"); continue
            }
            let view = try SealedPayload(parsing: ok.payload)
            #expect(ok.sealed)
            #expect(view.stanzas.map(\.keyID) == [SealedSamples.keyID(key, device: name)], "\(name) sees its own stanza alone")
            #expect(view.sealNonce == sealed.sealNonce && view.body == sealed.body)
        }
        #expect(status(of: try store.send(.fetch(Fetch(id: stored.id, token: late)), on: device)) == .notSealedForDevice,
                "enrolled after the sealing")
        #expect(status(of: try store.send(.fetch(Fetch(id: stored.id, token: keyless)), on: device)) == .notSealedForDevice, "no key")
        guard case .statusOK(let asked)? = try store.send(.status(StatusRequest(id: stored.id)), on: store.session(.provider)) else {
            Issue.record("no STATUS"); return
        }
        #expect(asked.fetchCount == 2, "the refused FETCHes are not counted")
        // Re-keyed: the stanza sealed to the old key is no longer this device's.
        _ = try store.login(device: "phone", key: SealedSamples.key(5))
        #expect(status(of: try store.send(.fetch(Fetch(id: stored.id, token: phone)), on: device)) == .notSealedForDevice)
        // 4.8-1's other checks come first.
        #expect(status(of: try store.send(.fetch(Fetch(id: stored.id, token: try store.keyedToken("bobs", key: nil, user: "bob"))),
                                          on: device)) == .forbidden)
    }

    /// A stand-in for PushSealing's Sealer: a stanza per device with made-up keys, and a
    /// body that holds no byte sequence of the content as it came.
    static let standInSealer: ArrivalSealer = { content, _, devices in
        SealedPayload(sealNonce: (0..<16).map { _ in UInt8.random(in: 0...255) }, stanzas: devices.map { SealedSamples.stanza($0.keyID, suite: $0.key.suite) },
                      body: content.map { $0 ^ 0xA5 } + Array(repeating: 0, count: 16)).bytes
    }

    /// Whether any file of the store's directory holds `text`.
    static func directoryHolds(_ text: String, _ directory: URL) throws -> Bool {
        let needle = Data(text.utf8)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            if let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path), data.range(of: needle) != nil { return true }
        }
        return false
    }

    @Test("[4.19-6] a STORE of payload_to_seal is sealed to the recipient's keyed devices and only the sealed form is written; no keyed device is NO_DEVICE_KEYS, an unknown user UNKNOWN_USER")
    func sealOnArrivalStore() throws {
        let store = try StoreFixture()
        let secret = "seal me on arrival 4711"
        let request = StoreRequest(user: "alice", payload: Array(secret.utf8), form: .sealOnArrival)
        store.logic.arrivalSealer = SealedStoreLogicTests.standInSealer
        #expect(status(of: try store.send(.store(request), on: store.session(.provider))) == .noDeviceKeys)
        var stranger = request
        stranger.user = "nobody"
        #expect(status(of: try store.send(.store(stranger), on: store.session(.provider))) == .unknownUser)
        let phoneKey = SealedSamples.key(1), tabletKey = SealedSamples.key(2)
        let phone = try store.keyedToken("phone", key: phoneKey)
        _ = try store.keyedToken("tablet", key: tabletKey)
        let keyless = try store.keyedToken("watch", key: nil)
        guard case .storeOK(let ok)? = try store.send(.store(request), on: store.session(.provider)) else { Issue.record("not stored"); return }
        #expect(ok.cursor == (try store.registrySequence()))
        let kept = try #require(try store.locate(ok.id))
        #expect(kept.sealed)
        let sealed = try SealedPayload(parsing: kept.body)
        #expect(ok.id == SealedNames.payloadID(sealNonce: sealed.sealNonce))
        #expect(Set(sealed.stanzas.map(\.keyID)) == [SealedSamples.keyID(phoneKey, device: "phone"), SealedSamples.keyID(tabletKey, device: "tablet")])
        guard case .fetchOK(let view)? = try store.send(.fetch(Fetch(id: ok.id, token: phone)), on: store.session(.device)) else {
            Issue.record("the phone could not fetch"); return
        }
        #expect(view.sealed && view.payload != Array(secret.utf8))
        #expect(status(of: try store.send(.fetch(Fetch(id: ok.id, token: keyless)), on: store.session(.device))) == .notSealedForDevice)
        try store.writer.checkpoint()
        #expect(!(try SealedStoreLogicTests.directoryHolds(secret, store.directory)), "the content reached a file")
    }

    @Test("[4.19-6] [4.19-7] a SEND of payload_to_seal is sealed to its audience's keys only, and its idempotency digest leaves the content out")
    func sealOnArrivalSend() throws {
        var settings = StoreSettings()
        settings.forwardsPushes = true
        let store = try StoreFixture(settings: settings)
        store.logic.arrivalSealer = SealedStoreLogicTests.standInSealer
        let phoneKey = SealedSamples.key(1)
        _ = try store.keyedToken("phone", key: phoneKey)
        _ = try store.keyedToken("tablet", key: SealedSamples.key(2))
        let send = SendRequest(user: "alice", payload: Array("for the phone".utf8), form: .sealOnArrival, target: .device("phone"),
                               idempotencyKey: "order-7")
        guard case .sendOK(let first)? = try store.send(.send(send), on: store.session(.provider)) else { Issue.record("not sent"); return }
        #expect(first.cursor != nil)
        let sealed = try SealedPayload(parsing: try #require(try store.locate(first.id)).body)
        #expect(sealed.stanzas.map(\.keyID) == [SealedSamples.keyID(phoneKey, device: "phone")], "the one device of the target")
        var retry = send
        retry.payload = Array("other text".utf8)
        guard case .sendOK(let again)? = try store.send(.send(retry), on: store.session(.provider)) else { Issue.record("no replay"); return }
        #expect(again.replayed && again.id == first.id, "a retry with other content under the key is the first SEND's replay")
        var unkeyedDevice = send
        unkeyedDevice.idempotencyKey = nil
        unkeyedDevice.target = .device("laptop")
        #expect(status(of: try store.send(.send(unkeyedDevice), on: store.session(.provider))) == .noDeviceKeys, "a device with no key")
        #expect(IdempotencyRecord.requestHash(send) == IdempotencyRecord.requestHash(retry))
    }
}
