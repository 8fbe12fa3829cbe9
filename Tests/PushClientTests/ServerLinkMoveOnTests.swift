import Testing
import PushClient
import PushEventLoop
import PushTestSupport
import PushWire

/// `ServerLink.moveOn` (what the store's forwarder does after a gateway's BUSY), against
/// two gateways in this process on 127.0.0.1.
@Suite("ServerLink: moving on to the next address", .ownThread, .serialized)
struct ServerLinkMoveOnTests {
    /// The first batch stays within the gateway's max_inflight, so all of it is outstanding.
    static let outstanding = 8

    final class Replies {
        var results: [Int: Result<Message, ClientError>] = [:]
        var failures: [Int] { results.filter { if case .success(.pushAck) = $0.value { false } else { true } }.keys.sorted() }
    }

    static func push(_ link: ServerLink, _ number: Int, into replies: Replies) {
        link.request(.push(Push(target: .device("phone"), id: Array("move-\(number)".utf8), ttlSeconds: 60))) { result in
            replies.results[number] = result
        }
    }

    static func link(_ loop: EventLoop, _ deployment: TemporaryDeployment, _ ports: [Int]) throws -> ServerLink {
        guard let addresses = AddressList(ports.map { HostPort(host: "127.0.0.1", port: $0) }) else {
            throw ServiceError.failed("no address")
        }
        // A credential for each HELLO: the gateway refuses one it has seen ([7.1-5]).
        return ServerLink(loop: loop, endpoint: ServerLink.Endpoint(addresses)) {
            Hello(role: .provider, credential: deployment.providerCredential(for: .gateway))
        }
    }

    @Test("moveOn waits for the replies outstanding on the connection, sends what comes meanwhile through the next address, reports nothing down, and comes back around")
    func movesOnOnceAnswered() throws {
        let deployment = try TemporaryDeployment()
        let first = try InProcessGateway(deployment)
        let second = try InProcessGateway(deployment)
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let link = try Self.link(loop, deployment, [first.port, second.port])
        var readies = 0
        var downs: [ClientError] = []
        link.onReady = { readies += 1 }
        link.onDown = { downs.append($0) }
        link.start()
        #expect(loop.run(until: { link.isReady }, timeoutSeconds: 5))

        let replies = Replies()
        for number in 0..<Self.outstanding { Self.push(link, number, into: replies) }
        link.moveOn()
        #expect(!link.isReady, "requests made now wait for the next connection")
        for number in Self.outstanding..<(2 * Self.outstanding) { Self.push(link, number, into: replies) }
        #expect(loop.run(until: { replies.results.count == 2 * Self.outstanding }, timeoutSeconds: 10))
        #expect(replies.failures.isEmpty, "every push answered PUSH_ACK, none lost to the move: \(replies.failures)")
        #expect(first.pushesAccepted == UInt64(Self.outstanding))
        #expect(second.pushesAccepted == UInt64(Self.outstanding))
        #expect(link.currentAddress.port == second.port)
        #expect(readies == 2 && downs.isEmpty, "\(readies) HELLO_OKs, downs: \(downs)")

        link.moveOn()
        #expect(loop.run(until: { link.isReady && link.currentAddress.port == first.port }, timeoutSeconds: 5),
                "wrapped around: ready \(link.isReady) at \(link.currentAddress), downs \(downs)")
        link.stop()
    }

    @Test("with one address moveOn does nothing: requests go on over the same connection")
    func oneAddress() throws {
        let deployment = try TemporaryDeployment()
        let gateway = try InProcessGateway(deployment)
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let link = try Self.link(loop, deployment, [gateway.port])
        var readies = 0
        link.onReady = { readies += 1 }
        link.start()
        #expect(loop.run(until: { link.isReady }, timeoutSeconds: 5))
        let replies = Replies()
        Self.push(link, 0, into: replies)
        link.moveOn()
        #expect(link.isReady)
        Self.push(link, 1, into: replies)
        #expect(loop.run(until: { replies.results.count == 2 }, timeoutSeconds: 5))
        #expect(replies.failures.isEmpty)
        #expect(readies == 1, "no new connection")
        link.stop()
    }
}
