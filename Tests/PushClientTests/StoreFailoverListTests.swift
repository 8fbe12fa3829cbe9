import Testing
@testable import PushClient
import PushEventLoop

/// The address list a client fails over across, and the order and delays it tries them in,
/// without sockets.
@Suite("Store failover: address lists and rotation")
struct StoreFailoverListTests {
    @Test("HOST:PORT,HOST:PORT parses in order, IPv6 in brackets, spaces around elements ignored")
    func parsesLists() throws {
        let list = try AddressList(parsing: "127.0.0.1:7070, [::1]:7071 ,store-2.example:7072")
        #expect(list.addresses == [HostPort(host: "127.0.0.1", port: 7070), HostPort(host: "::1", port: 7071),
                                   HostPort(host: "store-2.example", port: 7072)])
        #expect(list.description == "127.0.0.1:7070,[::1]:7071,store-2.example:7072")
        #expect(try AddressList(parsing: "localhost:1").addresses == [HostPort(host: "localhost", port: 1)])
        #expect(ServerLink.Endpoint(list).description == list.description)
        #expect(ServerLink.Endpoint(list).address == HostPort(host: "127.0.0.1", port: 7070))
    }

    @Test("a malformed list names the bad element, its position and what is wrong")
    func malformedLists() {
        let cases: [(String, Int, String)] = [
            ("127.0.0.1:7070,,127.0.0.1:7071", 2, "address 2 of 3 is empty"),
            ("127.0.0.1:7070,", 2, "address 2 of 2 is empty"),
            ("", 1, "the address is empty"),
            ("127.0.0.1:7070,nowhere", 2, "address 2 of 2, 'nowhere', is not HOST:PORT: no :PORT"),
            ("::1:7070", 1, "the address, '::1:7070', is not HOST:PORT: an IPv6 address goes in brackets"),
            ("a:1,b:99999,c:3", 2, "'b:99999', is not HOST:PORT: the port must be"),
            ("a:1;b:2", 1, "'a:1;b:2', is not HOST:PORT"),
        ]
        for (text, position, words) in cases {
            do {
                let list = try AddressList(parsing: text)
                Issue.record("'\(text)' parsed as \(list)")
            } catch {
                #expect(error.position == position, "\(text): \(error)")
                #expect(error.description.contains(words), "\(text): \(error)")
                #expect(!error.portIsZero)
            }
        }
        #expect(throws: AddressListError.self) { try AddressList(parsing: "127.0.0.1:7070,127.0.0.1:0") }
        #expect((try? AddressList(parsing: "127.0.0.1:0")) == nil)
        do {
            _ = try AddressList(parsing: "127.0.0.1:7070,127.0.0.1:0")
        } catch {
            #expect(error.portIsZero && error.position == 2)
        }
    }

    @Test("a failed address moves to the next at once; the backoff comes only once every address failed in a row")
    func rotationPaysBackoffPerRound() {
        var rotation = AddressRotation(count: 3)
        rotation.random = { $0.upperBound }  // the longest delay each time
        #expect(rotation.index == 0)
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 0, everyAddressFailed: false))
        #expect(rotation.index == 1)
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 0, everyAddressFailed: false))
        #expect(rotation.index == 2)
        // The third failure in a row ends the round: back to the first address after the backoff.
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 125, everyAddressFailed: true))
        #expect(rotation.index == 0)
        _ = rotation.failed(wasConnected: false, shuttingDown: false)
        _ = rotation.failed(wasConnected: false, shuttingDown: false)
        // Rounds that keep failing double the backoff, as a single address's failures did.
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 250, everyAddressFailed: true))
        // A connection that reaches HELLO_OK starts afresh.
        rotation.connected()
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 0, everyAddressFailed: false))
    }

    @Test("a dropped connection moves on within the drop jitter; GOAWAY SHUTTING_DOWN moves on at once")
    func dropsAndShutdowns() {
        var rotation = AddressRotation(count: 2)
        rotation.random = { $0.upperBound }
        rotation.connected()
        #expect(rotation.failed(wasConnected: true, shuttingDown: false)
                == .init(delayMs: AddressRotation.dropJitterMs, everyAddressFailed: false))
        rotation.connected()
        #expect(rotation.failed(wasConnected: true, shuttingDown: true) == .init(delayMs: 0, everyAddressFailed: false))
        #expect(rotation.index == 0, "wrapped around to the first address")
    }

    @Test("moving on (a BUSY the owner would rather take elsewhere) goes to the next address, wrapping, and a failure there starts a new round")
    func movedOn() {
        var rotation = AddressRotation(count: 2)
        rotation.random = { $0.upperBound }
        rotation.connected()
        rotation.movedOn()
        #expect(rotation.index == 1)
        // The next address refuses: back to the first at once, not after a backoff.
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 0, everyAddressFailed: false))
        #expect(rotation.index == 0)
        rotation.connected()
        rotation.movedOn()
        rotation.connected()
        rotation.movedOn()
        #expect(rotation.index == 0, "wrapped around")
    }

    @Test("with one address every failure is a round: the backoff a single-address link always had")
    func singleAddress() {
        var rotation = AddressRotation(count: 1)
        rotation.random = { $0.upperBound }
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 125, everyAddressFailed: true))
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 250, everyAddressFailed: true))
        // Connected but refused or closed before it stayed open: one more failure in the run ([5.8-3]).
        #expect(rotation.failed(wasConnected: true, shuttingDown: false) == .init(delayMs: 500, everyAddressFailed: true))
        rotation.connected()
        #expect(rotation.failed(wasConnected: true, shuttingDown: true) == .init(delayMs: 1_000, everyAddressFailed: true))
        // A connection that stayed open ends the run: the wait starts over.
        #expect(rotation.failed(wasConnected: true, shuttingDown: true, stayedOpen: true) == .init(delayMs: 125, everyAddressFailed: true))
        for _ in 0..<10 { _ = rotation.failed(wasConnected: false, shuttingDown: false) }
        #expect(rotation.failed(wasConnected: false, shuttingDown: false) == .init(delayMs: 6_250, everyAddressFailed: true),
                "capped at 5 s plus a quarter of it in jitter")
        #expect(rotation.index == 0)
    }
}
