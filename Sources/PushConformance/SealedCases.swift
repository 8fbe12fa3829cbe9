import PushSealing
import PushWire

/// Device keys (4.6-5 to 4.6-8), KEYS (4.18) and sealed payloads at the store (4.19, 7.6).
/// The sealed payloads are made up with the right structure and real key ids but no
/// cryptography: the store never opens them, and the suite only reads what it hands out.
enum SealedCases {
    static let all: [ConformanceCase] = keys + sealed + sealedOnArrival

    // MARK: helpers

    /// A fresh public key of `suite`'s length, random bytes (an X25519 key of small order
    /// among them has a chance of about 2^-250).
    /// A new key pair's public half: a store takes only keys swift-crypto takes ([4.6-6]).
    static func freshKey(_ suite: KeySuite = .x25519) throws(CaseStop) -> DevicePublicKey {
        do { return try DeviceKeyPair.generate(suite: suite).devicePublicKey } catch { throw .fail("making a \(suite) key: \(error)") }
    }

    static func keyID(_ key: DevicePublicKey, device: String) -> KeyID {
        SealedNames.keyID(suite: key.suite, deviceID: device, publicKey: key.bytes)
    }

    static func stanza(_ keyID: KeyID, suite: KeySuite = .x25519, fill: UInt8 = 0x5A) -> SealedPayload.Stanza {
        SealedPayload.Stanza(suite: suite, keyID: keyID, encapsulatedKey: Array(repeating: fill, count: suite.encapsulatedKeyCount),
                             wrappedKey: Array(repeating: fill &+ 1, count: SealedPayload.wrappedKeyCount))
    }

    /// A well-formed sealed payload with a fresh seal nonce (so a fresh id, 7.6-1).
    static func sealed(to stanzas: [SealedPayload.Stanza], body: [UInt8] = Array("made up, never opened by the store".utf8)) -> SealedPayload {
        var generator = SystemRandomNumberGenerator()
        let nonce = (0..<SealedPayload.sealNonceCount).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return SealedPayload(sealNonce: nonce, stanzas: stanzas, body: body.count >= 16 ? body : body + Array(repeating: 0, count: 16 - body.count))
    }

    /// A fresh device of the run's user, enrolled, logged in with `key`: its id and LOGIN_OK.
    static func keyedDevice(_ ctx: CaseContext, key: DevicePublicKey?) throws(CaseStop) -> (device: String, login: LoginOK) {
        let device = try ctx.enrolledDevice().deviceID
        let (ok, _) = try logIn(ctx, device: device, key: key)
        return (device, ok)
    }

    static func keys(_ session: WireSession, user: String) throws(CaseStop) -> KeysOK {
        let answer = try session.request(.keys(Keys(user: user)))
        guard case .keysOK(let ok) = answer else { throw .fail("KEYS for \(user) was answered \(describe(answer))") }
        return ok
    }

    static func storeSealed(_ session: WireSession, _ bytes: [UInt8], user: String, ttl: UInt32 = 600) throws(CaseStop) -> Message {
        try session.request(.store(StoreRequest(user: user, payload: bytes, form: .sealed, ttlSeconds: ttl)))
    }

    /// Sealed payloads that break 7.6-6, one rule each.
    static var malformed: [(String, [UInt8])] {
        let good = sealed(to: [stanza(KeyID(value: 1))]).bytes
        var version = good
        version[0] = 2
        var noStanza = Array(good[0..<17])
        noStanza.append(0)
        noStanza += Array(repeating: 0, count: 40)
        var unknownSuite = good
        unknownSuite[18] = 3
        let twice = SealedPayload(sealNonce: Array(good[1..<17]), stanzas: [stanza(KeyID(value: 1)), stanza(KeyID(value: 1))],
                                  body: Array(repeating: 0, count: 16)).bytes
        // A suite-2 stanza with a suite-1 enc: what follows is read as the rest of it.
        var shortEnc = Array(good[0..<18]) + [KeySuite.xwing.rawValue] + Array(repeating: 1, count: 8) + Array(repeating: 2, count: 32 + 48)
        shortEnc += Array(repeating: 3, count: 16)
        return [("version 2", version), ("count 0", noStanza), ("suite 3", unknownSuite), ("a key id in two stanzas", twice),
                ("a body of 15 bytes", Array(good[0..<(18 + 89 + 15)])), ("cut inside its stanza", Array(good[0..<60])),
                ("a suite-2 stanza with a suite-1 enc", shortEnc)]
    }

    // MARK: LOGIN's key and KEYS

    static let keys: [ConformanceCase] = [
        ConformanceCase("store.login-key", clause: "4.6-5", "LOGIN with a key registers it for the registration, and a new key replaces it") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            let first = try freshKey()
            let (device, _) = try keyedDevice(ctx, key: first)
            var listed = try keys(provider, user: user).keys.first { $0.deviceID == device }
            try Expect.equal(listed?.key, first, "the key KEYS lists for \(device) after its LOGIN")
            let second = try freshKey()
            _ = try logIn(ctx, device: device, key: second)
            listed = try keys(provider, user: user).keys.first { $0.deviceID == device }
            try Expect.equal(listed?.key, second, "the key KEYS lists for \(device) after a LOGIN with another")
            return "KEYS lists the key of the LOGIN right after LOGIN_OK, and the newer key after a second LOGIN"
        },

        ConformanceCase("store.login-key-small-order", clause: "4.6-6",
                        "a LOGIN with an X25519 key of small order is BAD_REQUEST, before the password, and registers nothing") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let device = try ctx.enrolledDevice().deviceID
            // The all-zero point: every agreement with it is zero, so a stanza sealed to it
            // could be opened by anyone (RFC 9180 7.1.4).
            let smallOrder = DevicePublicKey(suite: .x25519, bytes: Array(repeating: 0, count: 32))
            let login = Login(user: user, password: Array("not the password".utf8), deviceID: device, deviceKey: smallOrder)
            try Expect.refused(try ctx.storeDevice(), .login(login), .badRequest, "LOGIN with a small-order key and a wrong password")
            let listed = try keys(try ctx.storeProvider(), user: user).keys.contains { $0.deviceID == device }
            try Expect.that(!listed, "KEYS lists the refused key of \(device)")
            try ctx.registry().revoke(device)
            return "BAD_REQUEST (not BAD_CREDENTIALS: the key is checked first), nothing registered"
        },

        ConformanceCase("store.login-key-kept", clause: "4.6-7", "LOGIN without a key leaves the registered key") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let key = try freshKey()
            let (device, _) = try keyedDevice(ctx, key: key)
            let (again, _) = try logIn(ctx, device: device)
            try Expect.equal(again.keyID, keyID(key, device: device), "LOGIN_OK key_id of a LOGIN without a key")
            let listed = try keys(try ctx.storeProvider(), user: user).keys.first { $0.deviceID == device }
            try Expect.equal(listed?.key, key, "the key KEYS lists after a LOGIN without one")
            return "LOGIN_OK names the registered key and KEYS still lists it"
        },

        ConformanceCase("store.login-key-id", clause: "4.6-8", "LOGIN_OK carries key_id exactly when the registration has a key, the id of that key") { ctx throws(CaseStop) in
            let device = try ctx.enrolledDevice().deviceID
            let (keyless, _) = try logIn(ctx, device: device)
            try Expect.that(keyless.keyID == nil, "LOGIN_OK of a device with no key carried key_id \(keyless.keyID.map { "\($0)" } ?? "")")
            let key = try freshKey()
            let (keyed, _) = try logIn(ctx, device: device, key: key)
            try Expect.equal(keyed.keyID, keyID(key, device: device), "LOGIN_OK key_id after a LOGIN with a key")
            return "no key_id without a key; with one, its id (7.6-2)"
        },

        ConformanceCase("store.key-ids", clause: "7.6-2", "every key id KEYS lists is the 7.6-2 digest of its suite, device id and key") { ctx throws(CaseStop) in
            let user = try ctx.user()
            _ = try keyedDevice(ctx, key: freshKey())
            let listed = try keys(try ctx.storeProvider(), user: user).keys
            for entry in listed {
                try Expect.equal(entry.keyID, keyID(entry.key, device: entry.deviceID), "key id of \(entry.deviceID)")
            }
            return "\(listed.count) key ids, each the digest of its key"
        },

        ConformanceCase("store.keys-list", clause: "4.18-1", "KEYS lists the keyed, enrolled devices of a user in device id byte order; an unknown user is UNKNOWN_USER") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            let (b, _) = try keyedDevice(ctx, key: freshKey())
            let (a, _) = try keyedDevice(ctx, key: freshKey())
            let (revoked, _) = try keyedDevice(ctx, key: freshKey())
            let keyless = try ctx.enrolledDevice().deviceID
            try ctx.registry().revoke(revoked)
            let listed = try keys(provider, user: user).keys.map(\.deviceID)
            try Expect.that(listed.contains(a) && listed.contains(b), "KEYS did not list both keyed devices \(a), \(b): \(listed)")
            try Expect.that(!listed.contains(keyless), "KEYS listed \(keyless), which has no key")
            try Expect.that(!listed.contains(revoked), "KEYS listed \(revoked), revoked")
            let sorted = listed.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            try Expect.that(listed == sorted, "KEYS did not list the devices in byte order: \(listed)")
            try Expect.refused(provider, .keys(Keys(user: ctx.unique("nobody"))), .unknownUser, "KEYS for an unknown user")
            return "\(listed.count) keyed devices in byte order, none keyless or revoked; UNKNOWN_USER for an unknown user"
        },

        ConformanceCase("store.keys-cursor", clause: "4.18-3", "KEYS_OK's cursor changes with every enrolment, key and revocation of the user's devices") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            let start = try keys(provider, user: user).cursor
            let device = try ctx.enrolledDevice().deviceID
            let enrolled = try keys(provider, user: user).cursor
            try Expect.that(enrolled != start, "the cursor \(start) did not change with an enrolment")
            _ = try logIn(ctx, device: device, key: freshKey())
            let keyed = try keys(provider, user: user).cursor
            try Expect.that(keyed != enrolled, "the cursor \(enrolled) did not change with a new key")
            try ctx.registry().revoke(device)
            let revoked = try keys(provider, user: user).cursor
            try Expect.that(revoked != keyed, "the cursor \(keyed) did not change with a revocation")
            return "cursor \(start) -> \(enrolled) (enrolled) -> \(keyed) (key) -> \(revoked) (revoked)"
        },

        ConformanceCase("store.keys-too-large", clause: "4.18-6", "a KEYS_OK over the connection's max_frame is answered TOO_LARGE") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let (device, _) = try keyedDevice(ctx, key: freshKey(.xwing))
            let small = try ctx.storeProvider(maxFrame: 1024)
            try Expect.refused(small, .keys(Keys(user: user)), .tooLarge, "KEYS with a 1236-byte entry on a 1024-byte frame")
            _ = try keys(try ctx.storeProvider(), user: user)
            try ctx.registry().revoke(device)
            return "TOO_LARGE at max_frame 1024; KEYS_OK at the default"
        },
    ]

    // MARK: sealed payloads

    static let sealed: [ConformanceCase] = [
        ConformanceCase("store.sealed-malformed", clause: "4.19-1", "a malformed sealed_payload is BAD_REQUEST, whatever user it names") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            for (why, bytes) in malformed {
                try Expect.error(try storeSealed(provider, bytes, user: user), .badRequest, "STORE of a sealed payload with \(why)")
                try Expect.error(try storeSealed(provider, bytes, user: ctx.unique("nobody")), .badRequest,
                                 "STORE of a sealed payload with \(why), to an unknown user")
            }
            return "\(malformed.count) malformed sealed payloads, each BAD_REQUEST to the user and to an unknown one"
        },

        ConformanceCase("store.sealed-structure", clause: "7.6-6", "the store takes a sealed payload exactly when it is well formed") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            let smallest = sealed(to: [stanza(KeyID(value: 7), suite: .xwing), stanza(KeyID(value: 8))], body: Array(repeating: 0, count: 16))
            let answer = try storeSealed(provider, smallest.bytes, user: user, ttl: 60)
            guard case .storeOK(let stored) = answer else {
                throw .fail("a well-formed sealed payload (a suite-2 and a suite-1 stanza, a 16-byte body) was answered \(describe(answer))")
            }
            ctx.noteStored(stored.id)
            for (why, bytes) in malformed {
                try Expect.error(try storeSealed(provider, bytes, user: user), .badRequest, "a sealed payload with \(why)")
            }
            return "STORE_OK for a well-formed one; BAD_REQUEST for each of \(malformed.count) that break a rule"
        },

        ConformanceCase("store.sealed-id", clause: "4.19-2", "a sealed payload's id is derived from its seal nonce, and one the store knows is CONFLICT") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            let payload = sealed(to: [stanza(KeyID(value: 1))])
            let answer = try storeSealed(provider, payload.bytes, user: user, ttl: 60)
            guard case .storeOK(let stored) = answer else { throw .fail("a sealed STORE was answered \(describe(answer))") }
            ctx.noteStored(stored.id)
            try Expect.equal(stored.id, SealedNames.payloadID(sealNonce: payload.sealNonce), "STORE_OK id against 7.6-1's")
            try Expect.error(try storeSealed(provider, payload.bytes, user: user), .conflict, "the same sealed payload again")
            guard case .recallOK = try provider.request(.recall(Recall(id: stored.id))) else { throw .fail("RECALL of the sealed payload failed") }
            try Expect.error(try storeSealed(provider, payload.bytes, user: user), .conflict, "the same sealed payload once recalled")
            return "id derived from the nonce; CONFLICT for it again, live or gone"
        },

        ConformanceCase("store.sealed-cursor", clause: "4.18-5", "STORE_OK of a sealed payload carries the recipient's key cursor") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            let before = try keys(provider, user: user).cursor
            let answer = try storeSealed(provider, sealed(to: [stanza(KeyID(value: 2))]).bytes, user: user, ttl: 60)
            guard case .storeOK(let stored) = answer else { throw .fail("a sealed STORE was answered \(describe(answer))") }
            ctx.noteStored(stored.id)
            let after = try keys(provider, user: user).cursor
            guard before == after else { throw .skip("the user's devices changed during the case (cursor \(before) -> \(after))") }
            try Expect.equal(stored.cursor, after, "STORE_OK cursor against KEYS_OK's")
            let plain = try ctx.store(on: provider, user: user, ttl: 60)
            try Expect.that(plain.cursor == nil, "STORE_OK of a plain payload carried cursor \(plain.cursor ?? 0)")
            return "STORE_OK cursor \(after), as KEYS; none for a plain payload"
        },

        ConformanceCase("store.sealed-size", clause: "4.19-3", "the payload size limit counts a sealed payload with its stanzas") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            // The largest plain payload the store takes, by bisection below what one frame holds.
            var low = 0, high = 60_000
            let probe = { (size: Int) throws(CaseStop) -> Bool in
                let answer = try provider.request(.store(StoreRequest(user: user, payload: Array(repeating: 0x61, count: size), ttlSeconds: 60)))
                if case .storeOK(let ok) = answer { ctx.noteStored(ok.id); return true }
                try Expect.error(answer, .tooLarge, "STORE of \(size) plain bytes")
                return false
            }
            guard try !probe(high) else { throw .skip("the store takes plain payloads of \(high) bytes; the case needs a smaller limit") }
            while high - low > 1 {
                let middle = (low + high) / 2
                if try probe(middle) { low = middle } else { high = middle }
            }
            let overhead = 1 + SealedPayload.sealNonceCount + 1 + 1 + KeyID.byteCount + 32 + SealedPayload.wrappedKeyCount
            guard low - overhead >= SealedPayload.bodyTagCount else { throw .skip("the store's limit, \(low) bytes, holds no sealed payload") }
            let fits = sealed(to: [stanza(KeyID(value: 3))], body: Array(repeating: 1, count: low - overhead))
            let answer = try storeSealed(provider, fits.bytes, user: user, ttl: 60)
            guard case .storeOK(let stored) = answer else { throw .fail("a sealed payload of \(low) bytes, the limit, was answered \(describe(answer))") }
            ctx.noteStored(stored.id)
            let over = sealed(to: [stanza(KeyID(value: 3))], body: Array(repeating: 1, count: low - overhead + 1))
            try Expect.error(try storeSealed(provider, over.bytes, user: user), .tooLarge, "a sealed payload of \(low + 1) bytes")
            return "limit \(low) bytes: a sealed payload of exactly that, stanza included, is stored; one byte more is TOO_LARGE"
        },

        ConformanceCase("store.sealed-lifecycle", clause: "4.19-5", "SYNC, FETCH, ACK, STATUS and RECALL treat a sealed payload as any other") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            let key = try freshKey()
            let (device, login) = try keyedDevice(ctx, key: key)
            let payload = sealed(to: [stanza(keyID(key, device: device))])
            let answer = try storeSealed(provider, payload.bytes, user: user, ttl: 60)
            guard case .storeOK(let stored) = answer else { throw .fail("a sealed STORE was answered \(describe(answer))") }
            ctx.noteStored(stored.id)
            let session = try ctx.storeDevice()
            let listed = try session.request(.sync(Sync(token: login.token)))
            guard case .syncOK(let page) = listed, page.ids.contains(stored.id) else { throw .fail("SYNC did not list the sealed payload: \(describe(listed))") }
            guard case .fetchOK = try session.request(.fetch(Fetch(id: stored.id, token: login.token))) else { throw .fail("FETCH of the sealed payload failed") }
            let acked = try session.request(.ack(Ack(id: stored.id, token: login.token)))
            guard case .ackOK = acked else { throw .fail("ACK of the sealed payload was answered \(describe(acked))") }
            let fixture = try StoreFixture(ctx)
            let status = try fixture.status(stored.id) { $0.fetchCount >= 1 }
            try Expect.equal(status.state, .fetched, "STATUS of the fetched sealed payload")
            guard case .recallOK = try provider.request(.recall(Recall(id: stored.id))) else { throw .fail("RECALL of the sealed payload failed") }
            try Expect.error(try session.request(.fetch(Fetch(id: stored.id, token: login.token))), .gone, "FETCH once recalled")
            return "listed by SYNC, fetched, acknowledged, STATUS fetched, RECALL makes it GONE"
        },

        ConformanceCase("store.sealed-fetch", clause: "4.19-4", "FETCH of a sealed payload hands the device its own stanza alone, or NOT_SEALED_FOR_DEVICE") { ctx throws(CaseStop) in
            let user = try ctx.user()
            let provider = try ctx.storeProvider()
            let phoneKey = try freshKey(), tabletKey = try freshKey(.xwing)
            let (phone, phoneLogin) = try keyedDevice(ctx, key: phoneKey)
            let (tablet, tabletLogin) = try keyedDevice(ctx, key: tabletKey)
            let payload = sealed(to: [stanza(keyID(phoneKey, device: phone)), stanza(keyID(tabletKey, device: tablet), suite: .xwing)])
            let answer = try storeSealed(provider, payload.bytes, user: user, ttl: 60)
            guard case .storeOK(let stored) = answer else { throw .fail("a sealed STORE was answered \(describe(answer))") }
            ctx.noteStored(stored.id)
            let (_, lateLogin) = try keyedDevice(ctx, key: freshKey())
            let (_, keylessLogin) = try keyedDevice(ctx, key: nil)
            let device = try ctx.storeDevice()
            for (name, key, login) in [(phone, phoneKey, phoneLogin), (tablet, tabletKey, tabletLogin)] {
                let fetched = try device.request(.fetch(Fetch(id: stored.id, token: login.token)))
                guard case .fetchOK(let ok) = fetched else { throw .fail("FETCH by \(name), sealed to, was answered \(describe(fetched))") }
                try Expect.that(ok.sealed, "FETCH_OK to \(name) carried payload, not sealed_payload")
                try Expect.equal(ok.payload, payload.deviceView(for: keyID(key, device: name))?.bytes, "\(name)'s view")
            }
            try Expect.error(try device.request(.fetch(Fetch(id: stored.id, token: lateLogin.token))), .notSealedForDevice,
                             "FETCH by a device keyed after the sealing")
            try Expect.error(try device.request(.fetch(Fetch(id: stored.id, token: keylessLogin.token))), .notSealedForDevice,
                             "FETCH by a device with no key")
            return "each sealed-to device gets its view with one stanza; a later and a keyless device NOT_SEALED_FOR_DEVICE"
        },
    ]
}

/// Sealing on arrival ([4.19-6], [4.19-7]), and what the store's sealing must produce (7.6):
/// the suite plays a device with a real key pair and opens what the store sealed to it.
extension SealedCases {
    /// A keyed device, a payload_to_seal STOREd for the run's user and its view FETCHed.
    struct ArrivalSealing {
        var user: String
        var device: String
        var pair: DeviceKeyPair
        var text: [UInt8]
        var stored: StoreOK
        var view: [UInt8]

        func open(user: String? = nil, deviceID: String? = nil) throws(SealingError) -> [UInt8] {
            try Opener.open(view, fetchedID: stored.id, user: user ?? self.user, deviceID: deviceID ?? device, key: pair)
        }
    }

    static func sealOnArrival(_ ctx: CaseContext) throws(CaseStop) -> ArrivalSealing {
        let user = try ctx.user()
        let pair: DeviceKeyPair
        do { pair = try DeviceKeyPair.generate(suite: .x25519) } catch { throw .fail("making a key: \(error)") }
        let (device, login) = try keyedDevice(ctx, key: pair.devicePublicKey)
        let text = Array(ctx.unique("sealed on arrival").utf8)
        let answer = try ctx.storeProvider().request(.store(StoreRequest(user: user, payload: text, form: .sealOnArrival, ttlSeconds: 60)))
        guard case .storeOK(let stored) = answer else { throw .fail("a STORE of payload_to_seal was answered \(describe(answer))") }
        ctx.noteStored(stored.id)
        let fetched = try ctx.storeDevice().request(.fetch(Fetch(id: stored.id, token: login.token)))
        guard case .fetchOK(let ok) = fetched, ok.sealed else { throw .fail("FETCH of what the store sealed was answered \(describe(fetched))") }
        return ArrivalSealing(user: user, device: device, pair: pair, text: text, stored: stored, view: ok.payload)
    }

    static let sealedOnArrival: [ConformanceCase] = [
        ConformanceCase("store.seal-on-arrival", clause: "4.19-6",
                        "a STORE of payload_to_seal is kept sealed to the audience's keys: the device's view opens to the text") { ctx throws(CaseStop) in
            let sealing = try sealOnArrival(ctx)
            try Expect.that(sealing.stored.cursor != nil, "STORE_OK of a sealed payload without the key cursor")
            let opened: [UInt8]
            do { opened = try sealing.open() } catch { throw .fail("the view does not open: \(error)") }
            try Expect.equal(opened, sealing.text, "the opened text")
            return "STORE_OK with cursor \(sealing.stored.cursor ?? 0); the device's view opens to the text"
        },

        ConformanceCase("store.seal-on-arrival-id", clause: "7.6-1",
                        "the id of a payload the store sealed is SHA-256 of the label and its seal nonce, cut to 16 bytes") { ctx throws(CaseStop) in
            let sealing = try sealOnArrival(ctx)
            let view: SealedPayload
            do { view = try SealedPayload(parsing: sealing.view) } catch { throw .fail("the view is malformed: \(error)") }
            try Expect.equal(SealedNames.payloadID(sealNonce: view.sealNonce), sealing.stored.id, "the id derived from the seal nonce")
            return "STORE_OK's id \(sealing.stored.id) is the nonce's"
        },

        ConformanceCase("store.seal-on-arrival-binding", clause: "7.6-3",
                        "the store's stanza opens only with the info of its user and device") { ctx throws(CaseStop) in
            let sealing = try sealOnArrival(ctx)
            do { _ = try sealing.open() } catch { throw .fail("the stanza does not open with its own info: \(error)") }
            let other = ctx.unique("someone-else")
            guard case .failure(let error) = Result(catching: { () throws(SealingError) in try sealing.open(user: other) }) else {
                throw .fail("the stanza opened under another user's info")
            }
            try Expect.equal(error, .stanzaDoesNotOpen, "opening under another user's info")
            return "opens with its own info, not with another user's"
        },

        ConformanceCase("store.seal-on-arrival-body", clause: "7.6-4",
                        "the store's body is ChaCha20-Poly1305 under the content key with body_aad, and a changed byte does not open") { ctx throws(CaseStop) in
            var sealing = try sealOnArrival(ctx)
            do { _ = try sealing.open() } catch { throw .fail("the body does not open: \(error)") }
            sealing.view[sealing.view.count - 1] ^= 1
            let changed = sealing
            guard case .failure(let error) = Result(catching: { () throws(SealingError) in try changed.open() }) else {
                throw .fail("a body with its last byte changed opened")
            }
            try Expect.equal(error, .bodyDoesNotOpen, "opening a changed body")
            return "opens; a changed tag does not"
        },

        ConformanceCase("store.seal-on-arrival-retry", clause: "4.19-7",
                        "a keyed SEND of payload_to_seal is replayed by its other fields alone: a retry with other text gets the first answer") { ctx throws(CaseStop) in
            let user = try ctx.user()
            _ = try keyedDevice(ctx, key: freshKey())
            let provider = try ctx.storeProvider()
            let key = ctx.unique("seal-retry")
            func send(_ text: String, ttl: UInt32 = 60) throws(CaseStop) -> Message {
                try provider.request(.send(SendRequest(user: user, payload: Array(text.utf8), form: .sealOnArrival, ttlSeconds: ttl, idempotencyKey: key)))
            }
            guard case .sendOK(let first) = try send("first text") else { throw .fail("a SEND of payload_to_seal was refused") }
            ctx.noteStored(first.id)
            let again = try send("other text")
            guard case .sendOK(let retry) = again else { throw .fail("the retry with other text was answered \(describe(again))") }
            try Expect.that(retry.replayed && retry.id == first.id, "the retry got id \(retry.id) replayed \(retry.replayed), the first \(first.id)")
            try Expect.error(try send("first text", ttl: 61), .conflict, "the same key with another ttl_s")
            return "other text under the key: replayed; another ttl_s: CONFLICT"
        },
    ]
}
