@testable import PushSealing
import PushWire
import Testing

@Suite struct SealerOpenerTests {
    let text = Array("your code is 1237".utf8)

    /// [7.6-1] [7.6-5] Sealed to one device of either suite, the device view opens to the text
    /// under the id derived from seal_nonce.
    @Test(arguments: KeySuite.allCases)
    func roundTrip(suite: KeySuite) throws {
        let phone = try TestDevice("phone", suite: suite)
        let sealed = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        let payload = try SealedPayload(parsing: sealed.bytes)
        #expect(sealed.id == SealedNames.payloadID(sealNonce: payload.sealNonce))
        #expect(payload.stanzas.map(\.suite) == [suite])
        #expect(payload.stanzas.first?.encapsulatedKey.count == suite.encapsulatedKeyCount)
        #expect(payload.stanzas.first?.wrappedKey.count == 48)
        #expect(payload.body.count == text.count + 16)
        let view = try #require(try phone.view(of: sealed))
        #expect(try phone.open(view, id: sealed.id) == text)
    }

    /// [7.6-3] [7.6-7] Three devices, both suites in one payload: each opens its own view, and the payload's size is
    /// 18 + one stanza each + text + 16.
    @Test func threeDevices() throws {
        let devices = [try TestDevice("phone-1"), try TestDevice("phone-2"), try TestDevice("tablet", suite: .xwing)]
        let sealed = try Sealer.seal(text, recipient: "alice", devices: devices.map(\.entry))
        #expect(sealed.bytes.count == 18 + 89 + 89 + (9 + 1120 + 48) + text.count + 16)
        for device in devices {
            let view = try #require(try device.view(of: sealed))
            #expect(try device.open(view, id: sealed.id) == text)
        }
        // An empty text seals too: the body is the tag alone.
        let empty = try Sealer.seal([], recipient: "alice", devices: devices.map(\.entry))
        #expect(try devices[2].open(try #require(try devices[2].view(of: empty)), id: empty.id) == [])
    }

    /// [7.6-1] Every payload draws its own seal_nonce and content key.
    @Test func freshEachTime() throws {
        let phone = try TestDevice("phone")
        let first = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        let second = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        #expect(first.id != second.id)
        #expect(try SealedPayload(parsing: first.bytes).body != SealedPayload(parsing: second.bytes).body)
    }

    /// [7.6-5] A device view has exactly one stanza: the full payload, even with the device's
    /// stanza in it, is refused.
    @Test func fullPayloadRefused() throws {
        let devices = [try TestDevice("phone-1"), try TestDevice("phone-2")]
        let sealed = try Sealer.seal(text, recipient: "alice", devices: devices.map(\.entry))
        #expect(throws: SealingError.notOneStanza(2)) { try devices[0].open(sealed.bytes, id: sealed.id) }
    }

    /// [7.6-5] A view for another key, or another suite, is not opened.
    @Test func notForThisKey() throws {
        let phone = try TestDevice("phone")
        let tablet = try TestDevice("tablet")
        let sealed = try Sealer.seal(text, recipient: "alice", devices: [phone.entry, tablet.entry])
        let view = try #require(try tablet.view(of: sealed))
        #expect(throws: SealingError.notForThisKey) { try phone.open(view, id: sealed.id) }
        // The phone's own view, opened after the phone moved to an X-Wing key.
        let phoneView = try #require(try phone.view(of: sealed))
        let newPhone = try TestDevice("phone", suite: .xwing)
        #expect(throws: SealingError.notForThisKey) { try newPhone.open(phoneView, id: sealed.id) }
    }

    /// [7.6-1] [7.6-5] A view fetched under another id than its seal_nonce's (a store
    /// replaying it as a new payload) is refused before any key is used.
    @Test func fetchedUnderAnotherID() throws {
        let phone = try TestDevice("phone")
        let sealed = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        let view = try #require(try phone.view(of: sealed))
        #expect(throws: SealingError.idMismatch) { try phone.open(view, id: PayloadID(high: 1, low: 2)) }
    }

    /// [7.6-3] [7.6-5] A stanza moved into another payload for the same device (with that
    /// payload's nonce and body) does not open: its info names the first payload's id.
    @Test func stanzaMovedToAnotherPayload() throws {
        let phone = try TestDevice("phone")
        let first = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        let second = try Sealer.seal(Array("other".utf8), recipient: "alice", devices: [phone.entry])
        let firstView = try #require(try phone.view(of: first))
        let secondView = try #require(try phone.view(of: second))
        let moved = Array(secondView[..<ViewLayout.stanza]) + firstView[ViewLayout.stanza..<ViewLayout.stanzaEnd]
            + secondView[ViewLayout.stanzaEnd...]
        #expect(throws: SealingError.stanzaDoesNotOpen) { try phone.open(moved, id: second.id) }
        // The control: the second payload's own view opens.
        #expect(try phone.open(secondView, id: second.id) == Array("other".utf8))
    }

    /// [7.6-3] [7.6-5] The same key pair enrolled under another device id, with the stanza
    /// relabelled to that device's key id, does not open: info names the device id.
    @Test func stanzaMovedToAnotherDeviceID() throws {
        let phone = try TestDevice("phone")
        let sameKeyAsTablet = TestDevice("tablet", pair: phone.pair)
        let sealed = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        var view = try #require(try phone.view(of: sealed))
        view.replaceSubrange(ViewLayout.keyID, with: sameKeyAsTablet.keyID.bytes)
        #expect(throws: SealingError.stanzaDoesNotOpen) { try sameKeyAsTablet.open(view, id: sealed.id) }
        // A second device handed the phone's stanza under its own key id: not its key.
        let tablet = try TestDevice("tablet")
        view.replaceSubrange(ViewLayout.keyID, with: tablet.keyID.bytes)
        #expect(throws: SealingError.stanzaDoesNotOpen) { try tablet.open(view, id: sealed.id) }
    }

    /// [7.6-3] [7.6-4] [7.6-5] The same device id and key under another user does not open:
    /// info and body_aad name the recipient.
    @Test func stanzaMovedToAnotherUser() throws {
        let phone = try TestDevice("phone")
        let sealed = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        let view = try #require(try phone.view(of: sealed))
        #expect(throws: SealingError.stanzaDoesNotOpen) { try phone.open(view, id: sealed.id, user: "bob") }
        #expect(try phone.open(view, id: sealed.id, user: "alice") == text)
    }

    /// [7.6-4] [7.6-5] A changed body, or another payload's body under this stanza, fails
    /// the body's tag; a changed enc or wrapped key fails the stanza.
    @Test func tampered() throws {
        let phone = try TestDevice("phone")
        let sealed = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        let other = try Sealer.seal(text, recipient: "alice", devices: [phone.entry])
        let view = try #require(try phone.view(of: sealed))
        for index in [ViewLayout.stanzaEnd, view.count - 1] {
            var changed = view
            changed[index] ^= 1
            #expect(throws: SealingError.bodyDoesNotOpen) { try phone.open(changed, id: sealed.id) }
        }
        let otherView = try #require(try phone.view(of: other))
        #expect(throws: SealingError.bodyDoesNotOpen) {
            try phone.open(Array(view[..<ViewLayout.stanzaEnd]) + otherView[ViewLayout.stanzaEnd...], id: sealed.id)
        }
        for index in [ViewLayout.keyID.upperBound, ViewLayout.keyID.upperBound + 32, ViewLayout.stanzaEnd - 1] {
            var changed = view
            changed[index] ^= 1
            #expect(throws: SealingError.stanzaDoesNotOpen) { try phone.open(changed, id: sealed.id) }
        }
        // A cut view is no sealed payload at all.
        #expect(throws: SealingError.self) { try phone.open(Array(view.prefix(ViewLayout.stanzaEnd + 15)), id: sealed.id) }
    }

    /// [7.6-2] [7.6-7] The sealer refuses, before sealing anything, a listed key id that is
    /// not the key's, a small-order key, a key of the wrong length, and a key id twice.
    @Test func sealerRefusesBadKeys() throws {
        let phone = try TestDevice("phone")
        var wrongID = phone.entry
        wrongID.keyID = KeyID(value: wrongID.keyID.value ^ 1)
        #expect(throws: SealingError.keyIDMismatch(deviceID: "phone")) {
            try Sealer.seal(text, recipient: "alice", devices: [phone.entry, wrongID])
        }
        let zero = [UInt8](repeating: 0, count: 32)
        let smallOrder = DeviceKeyEntry(deviceID: "evil", key: DevicePublicKey(suite: .x25519, bytes: zero),
                                        keyID: SealedNames.keyID(suite: .x25519, deviceID: "evil", publicKey: zero))
        #expect(throws: SealingError.smallOrderKey) { try Sealer.seal(text, recipient: "alice", devices: [phone.entry, smallOrder]) }
        let short = Array(phone.pair.publicKey.dropLast())
        let shortEntry = DeviceKeyEntry(deviceID: "short", key: DevicePublicKey(suite: .x25519, bytes: short),
                                        keyID: SealedNames.keyID(suite: .x25519, deviceID: "short", publicKey: short))
        #expect(throws: SealingError.publicKeyLength(suite: .x25519, bytes: 31)) {
            try Sealer.seal(text, recipient: "alice", devices: [shortEntry])
        }
        #expect(throws: SealingError.duplicateKeyID(phone.keyID)) {
            try Sealer.seal(text, recipient: "alice", devices: [phone.entry, phone.entry])
        }
    }

    /// [7.6-7] An X-Wing key swift-crypto cannot encapsulate to is refused, not skipped.
    @Test func sealerRefusesBadXWingKey() throws {
        let bad = [UInt8](repeating: 0xff, count: 1216)
        let entry = DeviceKeyEntry(deviceID: "tablet", key: DevicePublicKey(suite: .xwing, bytes: bad),
                                   keyID: SealedNames.keyID(suite: .xwing, deviceID: "tablet", publicKey: bad))
        #expect(throws: SealingError.publicKeyRejected(suite: .xwing)) { try Sealer.seal(text, recipient: "alice", devices: [entry]) }
    }

    /// [7.6-6] count is 1 to 255; n() holds identifiers of 1 to 64 bytes (3.3-8).
    @Test func sealerLimits() throws {
        #expect(throws: SealingError.noDevices) { try Sealer.seal(text, recipient: "alice", devices: []) }
        let pair = try DeviceKeyPair.generate(suite: .x25519)
        let many = (0..<256).map { TestDevice("d\($0)", pair: pair).entry }
        #expect(throws: SealingError.tooManyDevices(256)) { try Sealer.seal(text, recipient: "alice", devices: many) }
        let most = try Sealer.seal(text, recipient: "alice", devices: Array(many.prefix(255)))
        let last = TestDevice("d254", pair: pair)
        #expect(try last.open(try #require(try last.view(of: most)), id: most.id) == text)

        let phone = try TestDevice("phone")
        #expect(throws: SealingError.self) { try Sealer.seal(text, recipient: "", devices: [phone.entry]) }
        #expect(throws: SealingError.self) {
            try Sealer.seal(text, recipient: String(repeating: "a", count: 65), devices: [phone.entry])
        }
        let longID = TestDevice(String(repeating: "p", count: 65), pair: pair)
        #expect(throws: SealingError.self) { try Sealer.seal(text, recipient: "alice", devices: [longID.entry]) }
    }
}
