import Foundation
import Testing
import PushClient
import PushClock
import PushEventLoop
import PushTestSupport
import PushWire

/// What a device does when the store answers BUSY and the like, or a request is lost to a
/// GOAWAY or a dropped connection (SPEC.md 5.8-4, 5.8-5), and what it shows once
/// (4.14-11..13), against a scripted gateway and store on 127.0.0.1.
@Suite("DeviceClient: retries and showing once", .ownThread, .serialized)
struct DeviceClientRetryTests {
    static let x = ScriptedDeviceFixture.id(1)
    static let content = Array("hello device".utf8)

    /// A fixture with a token whose store holds X, and the device connected.
    private func connected(withToken: Bool = true) throws -> ScriptedDeviceFixture {
        let fixture = try ScriptedDeviceFixture(withToken: withToken)
        fixture.store.payloads[Self.x] = Self.content
        fixture.start()
        #expect(withToken ? fixture.waitUntilConnected() : fixture.loop.run(until: { fixture.gatewayPeer != nil }))
        return fixture
    }

    /// The first request of `type` the store receives gets `reply` instead of its answer.
    private func failFirst(_ type: MessageType, _ fixture: ScriptedDeviceFixture,
                           _ reply: @escaping (ScriptedServer.Peer, UInt32) -> Void) {
        var failed = false
        fixture.store.override = { peer, message, correlation in
            guard message.type == type, !failed else { return false }
            failed = true
            reply(peer, correlation)
            return true
        }
    }

    @Test("[5.8-4] a FETCH answered BUSY, RATE_LIMITED or INTERNAL is asked again at least 100 ms later; the content is shown, never the generic prompt",
          arguments: [Status.busy, .rateLimited, .internalError])
    func fetchRetried(status: Status) throws {
        let fixture = try connected()
        failFirst(.fetch, fixture) { peer, correlation in peer.send(.error(ErrorReply(status: status)), correlation: correlation) }
        fixture.push(Self.x)
        #expect(fixture.loop.run(until: { fixture.store.requests(.ack).contains { $0.id == Self.x } }))
        let fetches = fixture.store.requests(.fetch).filter { $0.id == Self.x }
        #expect(fetches.count == 2, "\(fetches.count) FETCHes")
        if fetches.count == 2 { #expect(fetches[1].at - fetches[0].at >= 100, "retried after \(fetches[1].at - fetches[0].at) ms") }
        #expect(fixture.shown(Self.x) == [.payload(Self.content)])
    }

    @Test("[5.8-4] an ACK answered BUSY is sent again at least 100 ms later; the id is shown once")
    func ackRetried() throws {
        let fixture = try connected()
        failFirst(.ack, fixture) { peer, correlation in peer.send(.error(ErrorReply(status: .busy)), correlation: correlation) }
        fixture.push(Self.x)
        #expect(fixture.loop.run(until: { fixture.store.requests(.ack).count >= 2 }))
        let acks = fixture.store.requests(.ack)
        #expect(acks.allSatisfy { $0.id == Self.x })
        if acks.count >= 2 { #expect(acks[1].at - acks[0].at >= 100) }
        #expect(fixture.shown(Self.x) == [.payload(Self.content)])
    }

    @Test("[5.8-5] [4.4-2] a FETCH above a GOAWAY SHUTTING_DOWN's last_correlation is asked again on the next connection, though its SYNC lists nothing; nothing more is sent on the old one")
    func fetchLostToGoaway() throws {
        let fixture = try connected()
        var goawayAt: Int64 = 0
        failFirst(.fetch, fixture) { [loop = fixture.loop] peer, correlation in
            peer.send(.goaway(Goaway(status: .shuttingDown, lastCorrelation: correlation - 1)), correlation: 0)
            goawayAt = Clocks.monotonicMilliseconds()
            loop.schedule(after: .milliseconds(200)) { peer.close() }
        }
        fixture.push(Self.x)
        #expect(fixture.loop.run(until: { fixture.store.requests(.ack).contains { $0.id == Self.x } }))
        let fetches = fixture.store.requests(.fetch)
        #expect(fetches.count == 2 && Set(fetches.map(\.peer)).count == 2, "FETCHes on two connections: \(fetches)")
        #expect(fixture.shown(Self.x) == [.payload(Self.content)])
        let first = fixture.store.server.peers[0].received.filter { $0.at > goawayAt && $0.message.type != .pong }
        #expect(first.isEmpty, "sent after the GOAWAY: \(first.map(\.message.type))")
    }

    @Test("[5.8-5] a FETCH outstanding when the store's connection drops is asked again on the next one")
    func fetchLostToDrop() throws {
        let fixture = try connected()
        failFirst(.fetch, fixture) { peer, _ in peer.close() }
        fixture.push(Self.x)
        #expect(fixture.loop.run(until: { !fixture.shown(Self.x).isEmpty && !fixture.store.requests(.ack).isEmpty }))
        #expect(fixture.store.requests(.fetch).count == 2)
        #expect(fixture.shown(Self.x) == [.payload(Self.content)])
    }

    @Test("[5.8-5] an ACK outstanding when the store's connection drops is sent again on the next one, though its SYNC lists nothing")
    func ackLostToDrop() throws {
        let fixture = try connected()
        failFirst(.ack, fixture) { peer, _ in peer.close() }
        fixture.push(Self.x)
        #expect(fixture.loop.run(until: { fixture.store.requests(.ack).count >= 2 }))
        let acks = fixture.store.requests(.ack)
        #expect(acks.allSatisfy { $0.id == Self.x } && Set(acks.map(\.peer)).count == 2, "\(acks)")
        #expect(fixture.shown(Self.x) == [.payload(Self.content)])
    }

    @Test("[5.8-5] a SYNC above a GOAWAY's last_correlation is asked again on the next connection")
    func syncLostToGoaway() throws {
        let fixture = try ScriptedDeviceFixture()
        fixture.store.payloads[Self.x] = Self.content
        fixture.store.listed = [Self.x]
        failFirst(.sync, fixture) { [loop = fixture.loop] peer, correlation in
            peer.send(.goaway(Goaway(status: .shuttingDown, lastCorrelation: correlation - 1)), correlation: 0)
            loop.schedule(after: .milliseconds(200)) { peer.close() }
        }
        fixture.start()
        #expect(fixture.loop.run(until: { fixture.store.requests(.ack).contains { $0.id == Self.x } }))
        #expect(fixture.shown(Self.x) == [.payload(Self.content)])
        #expect(Set(fixture.store.server.messages(.sync).map(\.peer)).count >= 2)
    }

    @Test("[4.14-11] [4.14-13] without a token the generic prompt shows once, across a restart and a repeated push; a token written later fetches the id and shows its content")
    func genericOnceThenFetched() throws {
        let fixture = try connected(withToken: false)
        fixture.push(Self.x)
        #expect(fixture.loop.run(until: { !fixture.shown.isEmpty }))
        fixture.stop()
        fixture.start()
        #expect(fixture.loop.run(until: { fixture.gatewayPeer != nil && fixture.gateway.peers.count == 2 }))
        fixture.push(Self.x, correlation: 0x2002)
        fixture.loop.run(until: { false }, timeoutSeconds: 0.5)
        #expect(fixture.shown(Self.x) == [.generic], "the prompt once, across the restart")
        #expect(fixture.store.requests(.fetch).isEmpty && fixture.store.requests(.ack).isEmpty)

        try fixture.writeToken()
        #expect(fixture.loop.run(until: { fixture.shown(Self.x).count == 2 }, timeoutSeconds: 3))
        #expect(fixture.shown(Self.x) == [.generic, .payload(Self.content)])
        #expect(fixture.loop.run(until: { fixture.store.requests(.ack).contains { $0.id == Self.x } }))
    }

    @Test("[4.14-12] [4.14-13] a FETCH refused TOKEN_EXPIRED shows the generic prompt once and is not acknowledged; the next token fetches it")
    func expiredTokenThenLogin() throws {
        let fixture = try connected()
        failFirst(.fetch, fixture) { peer, correlation in peer.send(.error(ErrorReply(status: .tokenExpired)), correlation: correlation) }
        fixture.push(Self.x)
        #expect(fixture.loop.run(until: { !fixture.shown.isEmpty }))
        fixture.loop.run(until: { false }, timeoutSeconds: 0.5)
        #expect(fixture.shown(Self.x) == [.generic])
        #expect(fixture.store.requests(.ack).isEmpty && fixture.store.requests(.fetch).count == 1)
        // A login: the file is written again (another inode), which the device notices.
        try fixture.writeToken()
        #expect(fixture.loop.run(until: { fixture.shown(Self.x).count == 2 }, timeoutSeconds: 3))
        #expect(fixture.shown(Self.x) == [.generic, .payload(Self.content)])
    }

    @Test("[4.14-11] an id shown before a restart is not shown again when SYNC lists it and the gateway pushes it again; its ACK is sent again")
    func restartShowsOnce() throws {
        let fixture = try connected()
        fixture.push(Self.x)
        #expect(fixture.loop.run(until: { !fixture.store.requests(.ack).isEmpty }))
        fixture.stop()
        fixture.store.listed = [Self.x]
        fixture.start()
        #expect(fixture.loop.run(until: { fixture.gateway.peers.count == 2 && fixture.gatewayPeer != nil }))
        fixture.push(Self.x, correlation: 0x2002)
        #expect(fixture.loop.run(until: { fixture.store.requests(.ack).count >= 2 }))
        fixture.loop.run(until: { false }, timeoutSeconds: 0.3)
        #expect(fixture.shown(Self.x) == [.payload(Self.content)])
        #expect(fixture.store.requests(.fetch).count == 1)
    }
}
