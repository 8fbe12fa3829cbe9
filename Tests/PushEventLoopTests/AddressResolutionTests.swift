import Glibc
import PushEventLoop
import Testing

/// Host names, IPv6 and several addresses per listener.
extension EventLoopSuite {
    /// Connects to `host`:`port`, writes one frame and waits for it to come back.
    private func echoes(_ loop: EventLoop, host: String, port: Int) -> Bool {
        var echoed = false
        var finished = false
        Connection.connect(loop: loop, host: host, port: port) { result in
            guard case .success(let connection) = result else {
                finished = true
                loop.stop()
                return
            }
            connection.callbacks.frame = { connection, header, _ in
                echoed = header.correlation == 77
                connection.close()
                finished = true
                loop.stop()
            }
            connection.write(makeFrame(correlation: 77, body: [1, 2, 3]))
        }
        runLoop(loop, timeout: .seconds(5))
        return finished && echoed
    }

    @Test func numericAddressesResolveWithoutALookup() throws {
        #expect(try SocketAddress.resolve(host: "127.0.0.1", port: 7070) == [try SocketAddress(host: "127.0.0.1", port: 7070)])
        #expect(try SocketAddress.resolve(host: "[::1]", port: 7070).map(\.description) == ["[::1]:7070"])
        #expect(try HostPort(host: "::", port: 0).resolve().first?.isUnspecified == true)
        #expect(HostPort(host: "::1", port: 1).isNumeric)
        #expect(!HostPort(host: "localhost", port: 1).isNumeric)
        #expect(throws: EventLoopError.invalidAddress("127.0.0.1:65536")) { _ = try SocketAddress.resolve(host: "127.0.0.1", port: 65_536) }
    }

    @Test func namesResolveAndUnknownOnesAreATypedError() throws {
        let local = try SocketAddress.resolve(host: "localhost", port: 7070)
        #expect(!local.isEmpty)
        #expect(local.allSatisfy { $0.port == 7070 && ($0.host == "127.0.0.1" || $0.host == "::1") })
        #expect(Set(local.map(\.description)).count == local.count, "no duplicates")
        do {
            _ = try SocketAddress.resolve(host: "nohost.invalid", port: 7070)
            Issue.record("nohost.invalid resolved")
        } catch {
            guard case .cannotResolve(let host, let reason, _) = error else {
                Issue.record("unexpected error \(error)")
                return
            }
            #expect(host == "nohost.invalid")
            #expect(error.description == "cannot resolve 'nohost.invalid': \(reason)")
        }
    }

    @Test func aListenerOnANameServesClientsThatConnectByName() throws {
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "localhost", port: 0) { $0.handler = echo }
            #expect(listener.port != 0)
            #expect(Set(listener.addresses.map(\.port)) == [listener.port], "one port for every address")
            #expect(echoes(loop, host: "localhost", port: listener.port))
            for address in listener.addresses {
                #expect(echoes(loop, host: address.host, port: listener.port), "\(address)")
            }
            listener.close()
        }
    }

    @Test func anIPv6LoopbackListenerServesIPv6Clients() throws {
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "[::1]", port: 0) { $0.handler = echo }
            #expect(listener.address.isIPv6)
            #expect(listener.address.description == "[::1]:\(listener.port)")
            #expect(echoes(loop, host: "::1", port: listener.port))
            listener.close()
        }
    }

    @Test func theIPv6WildcardAloneIsDualStack() throws {
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "::", port: 0) { $0.handler = echo }
            #expect(listener.addresses.count == 1)
            #expect(echoes(loop, host: "::1", port: listener.port))
            #expect(echoes(loop, host: "127.0.0.1", port: listener.port), "IPv4 clients reach [::]")
            listener.close()
        }
    }

    @Test func severalAddressesShareThePortPickedForTheFirst() throws {
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(
                loop: loop, addresses: [try SocketAddress(host: "127.0.0.1", port: 0), try SocketAddress(host: "::1", port: 0)]
            ) { $0.handler = echo }
            #expect(listener.addresses.map(\.host) == ["127.0.0.1", "::1"])
            #expect(listener.addresses.allSatisfy { $0.port == listener.port })
            #expect(echoes(loop, host: "127.0.0.1", port: listener.port))
            #expect(echoes(loop, host: "::1", port: listener.port))
            // The wildcards of both families side by side: each IPv6 socket is IPv6-only.
            let both = try Listener(
                loop: loop, addresses: [try SocketAddress(host: "0.0.0.0", port: 0), try SocketAddress(host: "::", port: 0)]
            ) { $0.handler = echo }
            #expect(both.addresses.count == 2)
            #expect(echoes(loop, host: "127.0.0.1", port: both.port))
            #expect(echoes(loop, host: "::1", port: both.port))
            both.close()
            listener.close()
        }
    }
}
