import Testing
import PushClient
import PushTestSupport
import PushWire
@testable import PushGateway

/// Device ids, users and tags at the gateway are compared as exact bytes ([3.3-9]): the
/// NFC and NFD spellings of one name, equal under Swift's `String ==`, are two names.
@Suite("Gateway names as exact bytes", .ownThread)
struct GatewayNameBytesTests {
    /// "zoë" with U+00EB, and with "e" and U+0308.
    static let nfc = "zo\u{EB}"
    static let nfd = "zoe\u{308}"
    static let cafeNFC = "caf\u{E9}"
    static let cafeNFD = "cafe\u{301}"

    @Test("[3.3-9] [5.5-3] devices whose ids are the NFC and NFD spellings of one name are connected at once, each gets only its pushes")
    func twoDeviceIDs() {
        let gateway = GatewayFixture()
        let (_, composed) = gateway.connect(Self.nfc)
        let (_, decomposed) = gateway.connect(Self.nfd)
        #expect(!composed.wasReplaced && !decomposed.wasReplaced, "neither replaces the other")
        #expect(composed.open && decomposed.open)
        #expect(gateway.logic.devices.count == 2)
        #expect(gateway.push(.device(Self.nfc), id: 1) == PushAck(written: 1, queued: 0))
        #expect(gateway.push(.device(Self.nfd), id: 2) == PushAck(written: 1, queued: 0))
        #expect(composed.pushes.map { $0.1.id } == [[1]])
        #expect(decomposed.pushes.map { $0.1.id } == [[2]])
    }

    @Test("[3.3-9] [4.13-3] a push to tag \"café\" (NFC) does not reach a device tagged with the NFD spelling")
    func tags() {
        let gateway = GatewayFixture()
        let (_, composed) = gateway.connect("phone", tags: [Self.cafeNFC])
        let (_, decomposed) = gateway.connect("tablet", tags: [Self.cafeNFD])
        #expect(gateway.push(.tag(Self.cafeNFC), id: 1) == PushAck(written: 1, queued: 0))
        #expect(composed.pushes.map { $0.1.id } == [[1]])
        #expect(decomposed.pushes.isEmpty)
    }

    @Test("[3.3-9] [4.13-3] [4.13-11] users: a target and a PUSH's `user` match only their own spelling")
    func users() {
        let gateway = GatewayFixture()
        let (_, composed) = gateway.connect("phone", user: Self.nfc, tags: ["news"])
        let (_, decomposed) = gateway.connect("tablet", user: Self.nfd, tags: ["news"])
        #expect(gateway.push(.user(Self.nfc), id: 1) == PushAck(written: 1, queued: 0))
        // A PUSH restricted to the NFD user: the tag matches both devices, the user one.
        let ack = gateway.logic.push(Push(target: .tag("news"), id: [2], ttlSeconds: 60, user: Self.nfd))
        carryOut(gateway.logic)
        #expect(ack == PushAck(written: 1, queued: 0))
        let restricted = gateway.logic.push(Push(target: .user(Self.nfc), id: [3], ttlSeconds: 60, user: Self.nfd))
        carryOut(gateway.logic)
        #expect(restricted == PushAck(written: 0, queued: 0), "another user's target holds none of this user's devices")
        #expect(composed.pushes.map { $0.1.id } == [[1]])
        #expect(decomposed.pushes.map { $0.1.id } == [[2]])
    }

    @Test("[3.3-9] [4.13-7] [4.13-11] with a registry: NFC and NFD device ids, users and tags are enrolled apart")
    func registry() throws {
        let gateway = RegistryGatewayFixture()
        let composed = gateway.maker.credential(Self.nfc, user: Self.nfc, tags: [Self.cafeNFC])
        let decomposed = gateway.maker.credential(Self.nfd, user: Self.nfd, tags: [Self.cafeNFD])
        let update = gateway.apply([enrolled(composed), enrolled(decomposed)])
        #expect(update.revocations == 0, "the second enrolment replaces nothing")
        #expect(gateway.logic.registry?.enrolledCount == 2)
        let (_, first) = try #require(gateway.connect(composed))
        let (_, second) = try #require(gateway.connect(decomposed))
        #expect(!first.wasReplaced && !second.wasReplaced)
        #expect(gateway.push(.device(Self.nfc), id: 1) == PushAck(written: 1, queued: 0))
        #expect(gateway.push(.tag(Self.cafeNFD), id: 2) == PushAck(written: 1, queued: 0))
        #expect(gateway.push(.user(Self.nfc), id: 3) == PushAck(written: 1, queued: 0))
        let ack = gateway.logic.push(Push(target: .device(Self.nfc), id: [4], ttlSeconds: 60, user: Self.nfd))
        carryOut(gateway.logic)
        #expect(ack == PushAck(written: 0, queued: 0), "the device is enrolled for the NFC user")
        #expect(first.pushes.map { $0.1.id } == [[1], [3]])
        #expect(second.pushes.map { $0.1.id } == [[2]])
    }

    @Test("[3.3-9] [5.5-3] over sockets: devices \"zoë\" in NFC and in NFD stay connected side by side, each gets only its own push")
    func overSockets() throws {
        let gateway = try RunningGateway()
        let composed = try gateway.device(Self.nfc, user: Self.nfc)
        let decomposed = try gateway.device(Self.nfd, user: Self.nfd)
        let provider = try gateway.provider()
        #expect(try gateway.push(.device(Self.nfd), id: "for-nfd", via: provider) == PushAck(written: 1, queued: 0))
        #expect(try gateway.push(.user(Self.nfc), id: "for-nfc", via: provider) == PushAck(written: 1, queued: 0))
        // A REPLACED would come as GOAWAY before the push.
        #expect(try composed.nextPushID() == "for-nfc")
        #expect(try decomposed.nextPushID() == "for-nfd")
        #expect(throws: BlockingWireClient.Failure.timedOut) { try composed.receive(timeoutMs: 200) }
        #expect(throws: BlockingWireClient.Failure.timedOut) { try decomposed.receive(timeoutMs: 200) }
    }
}
