import Testing
import PushWire

/// The one rule for names ([3.3-8], [3.3-9]): what `Identifier` refuses, what the wire
/// decoder refuses with it, and names compared as exact bytes.
@Suite("Identifiers")
struct IdentifierTests {
    private func roundTrip(_ message: Message) throws -> Message {
        var decoder = FrameDecoder()
        decoder.feed(message.encoded(correlation: 9))
        let frame = try #require(try decoder.next())
        return try Message.decode(frame)
    }

    @Test("[3.3-8] a control character (C0, DEL, C1) anywhere in a name is refused, with where it is; other characters pass")
    func controlCharacters() {
        let refused: [(String, UInt32, Int)] = [
            ("alice\0bob", 0x00, 5), ("alice\0", 0x00, 5), ("\0", 0x00, 0), ("a\tb", 0x09, 1), ("news\n", 0x0A, 4),
            ("a\r\nb", 0x0D, 1), ("x\u{1B}[31m", 0x1B, 1), ("otp\u{7F}", 0x7F, 3), ("phone\u{85}", 0x85, 5),
            ("zoë\u{80}", 0x80, 4), ("\u{9F}", 0x9F, 0),
        ]
        for (name, scalar, offset) in refused {
            #expect(Identifier.fault(in: name, as: .user) == .controlCharacter(scalar: scalar, offset: offset), "\(name.debugDescription)")
        }
        // U+00A0 (c2 a0) follows the C1 block; format characters are not controls (Cf, not Cc).
        for name in ["alice", "zoë", "zoe\u{308}", "端末-1", "a\u{A0}b", "a\u{200B}b", "\u{202E}x", "a b", "emoji-🙂"] {
            #expect(Identifier.fault(in: name, as: .user) == nil, "\(name.debugDescription)")
        }
        #expect(Identifier.fault(in: "", as: .deviceID) == .empty)
        #expect(Identifier.fault(in: String(repeating: "k", count: 128), as: .idempotencyKey) == nil)
        #expect(Identifier.fault(in: String(repeating: "k", count: 129), as: .idempotencyKey) == .tooLong(bytes: 129, max: 128))
        #expect(Identifier.fault(in: String(repeating: "ë", count: 33), as: .tag) == .tooLong(bytes: 66, max: 64), "bytes, not characters")
        let error = IdentifierError(kind: .user, value: "alice\0bob", fault: .controlCharacter(scalar: 0, offset: 5))
        #expect(error.description == #"a user name may not contain a control character: "alice\0bob" has U+0000 at byte 5"#)
    }

    @Test("[3.3-8] [4.7-3] STORE, SEND, LOGIN and PUSH with a control character in an identifier field are BAD_REQUEST, never cut short")
    func decoderRefusesControlCharacters() {
        let cases: [(Message, FieldTag)] = [
            (.store(StoreRequest(user: "alice\0bob", payload: [1])), .user),
            (.store(StoreRequest(user: "alice\0", payload: [1])), .user),
            (.send(SendRequest(user: "alice\0", payload: [1])), .user),
            (.send(SendRequest(user: "alice", payload: [1], target: .tag("team\n"))), .target),
            (.send(SendRequest(user: "alice", payload: [1], collapseKey: "otp\u{7F}")), .collapseKey),
            (.send(SendRequest(user: "alice", payload: [1], idempotencyKey: "key\t1")), .idempotencyKey),
            (.login(Login(user: "alice", password: [1], deviceID: "phone\u{85}")), .deviceID),
            (.push(Push(target: .device("phone\0"), id: [1])), .target),
        ]
        for (message, tag) in cases {
            #expect(throws: WireError.controlCharacter(tag), "\(message)") { _ = try roundTrip(message) }
            #expect(WireError.controlCharacter(tag).status == .badRequest)
        }
    }

    @Test("[3.3-2] [3.3-9] a name decodes to exactly the bytes sent: NFD stays NFD")
    func exactBytesThroughTheCodec() throws {
        let nfd = "zoe\u{308}"
        guard case .store(let store) = try roundTrip(.store(StoreRequest(user: nfd, payload: [1]))) else { Issue.record("no STORE"); return }
        #expect(Array(store.user.utf8) == [0x7A, 0x6F, 0x65, 0xCC, 0x88])
    }

    @Test("[3.3-9] zoë in NFC and in NFD are two names, though Swift's == calls them equal")
    func exactNames() {
        let nfc = "zo\u{EB}", nfd = "zoe\u{308}"
        #expect(nfc == nfd, "canonical equivalence: why every map of names uses ExactName")
        #expect(!nfc.isExactly(nfd))
        #expect(ExactName(nfc) != ExactName(nfd))
        #expect(Set([ExactName(nfc), ExactName(nfd)]).count == 2)
        #expect(ExactName("alice") == ExactName(String("xalice".dropFirst())))
        #expect(Set([nfc, nfd]).count == 1, "a Set<String> would merge them")
    }
}
