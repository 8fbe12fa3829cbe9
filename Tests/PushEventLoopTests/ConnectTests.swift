import Glibc
import PushEventLoop
import PushTestSupport
import Testing

extension EventLoopSuite {
    /// Connects and returns the result, running the loop until it arrives.
    private func connectResult(
        _ loop: EventLoop, host: String = "127.0.0.1", port: Int, sourceAddress: String? = nil
    ) -> Result<Connection, ConnectError>? {
        var outcome: Result<Connection, ConnectError>?
        Connection.connect(loop: loop, host: host, port: port, sourceAddress: sourceAddress) { result in
            outcome = result
            loop.stop()
        }
        runLoop(loop, timeout: .seconds(5))
        return outcome
    }

    @Test func connectToAClosedPortIsRefused() throws {
        try withEventLoop { loop in
            // Below the ephemeral range, so no other test's port-0 listener is given it meanwhile.
            let port = try freeLoopbackPort()
            guard case .failure(let error)? = connectResult(loop, port: port) else {
                Issue.record("connect to a closed port did not fail")
                return
            }
            #expect(error == .refused)
            #expect(loop.openConnectionCount == 0)
        }
    }

    @Test func connectRejectsBadAddressesAndUnknownNames() throws {
        try withEventLoop { loop in
            #expect(failure(connectResult(loop, port: 70_000)) == .invalidAddress("127.0.0.1:70000"))
            #expect(failure(connectResult(loop, port: 1, sourceAddress: "::1")) == .invalidAddress("::1"))
            guard case .cannotResolve(let host, let reason, _)? = failure(connectResult(loop, host: "nohost.invalid", port: 1))
            else {
                Issue.record("a name that does not exist did not fail to resolve")
                return
            }
            #expect(host == "nohost.invalid")
            #expect(!reason.isEmpty)
        }
    }

    @Test func sourceAddressBindsTheLocalEnd() throws {
        try withEventLoop { loop in
            var serverSawPeer: SocketAddress?
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                serverSawPeer = connection.peerAddress
            }
            guard case .success(let connection)? = connectResult(loop, port: listener.port, sourceAddress: "127.0.0.1")
            else {
                Issue.record("connect with a source address failed")
                return
            }
            // Let the accept happen.
            loop.schedule(after: .milliseconds(20)) { loop.stop() }
            runLoop(loop)
            #expect(connection.localAddress?.host == "127.0.0.1")
            #expect(connection.peerAddress == listener.address)
            #expect(serverSawPeer == connection.localAddress)
            connection.close()
        }
    }

    /// Writes made before the connect completes wait in the transport and go out once
    /// it does.
    @Test func writesQueuedWhileConnectingGoOutOnceConnected() throws {
        try withEventLoop { loop in
            let echo = EchoHandler()
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { $0.handler = echo }
            let client = PipelinedClient(total: 3, window: 3)
            client.done = { loop.stop() }
            let pending = Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                guard case .success(let connection) = result else {
                    Issue.record("connect failed: \(result)")
                    loop.stop()
                    return
                }
                connection.handler = client
            }
            #expect(pending?.isConnecting == true)
            if let pending { client.start(pending) }
            #expect((pending?.outputBufferedBytes ?? 0) > 0)
            runLoop(loop, timeout: .seconds(5))
            #expect(client.succeeded)
            pending?.close()
        }
    }

    @Test func closingAPendingConnectCancelsIt() throws {
        try withEventLoop { loop in
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { _ in }
            var outcome: Result<Connection, ConnectError>?
            let pending = Connection.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
                outcome = result
            }
            #expect(pending?.isConnecting == true)
            pending?.close()
            #expect(failure(outcome) == .cancelled)
            #expect(pending?.isOpen == false)
        }
    }

    @Test func bindingABusyPortIsATypedError() throws {
        try withEventLoop { loop in
            let first = try Listener(loop: loop, host: "127.0.0.1", port: 0) { _ in }
            #expect(throws: EventLoopError.self) {
                _ = try Listener(loop: loop, host: "127.0.0.1", port: first.port) { _ in }
            }
            #expect(throws: EventLoopError.invalidAddress("127.0.0.1:65536")) {
                _ = try Listener(loop: loop, host: "127.0.0.1", port: 65_536) { _ in }
            }
        }
    }

    @Test func socketAddressParsesIPv4AndIPv6Literals() throws {
        let v4 = try SocketAddress(host: "127.0.0.1", port: 8080)
        #expect(!v4.isIPv6)
        #expect(v4.description == "127.0.0.1:8080")
        let v6 = try SocketAddress(host: "::1", port: 443)
        #expect(v6.isIPv6)
        #expect(v6.description == "[::1]:443")
        #expect(try SocketAddress(host: "[::1]", port: 443) == v6)
        #expect(try SocketAddress(host: "fe80::1:2", port: 0).host == "fe80::1:2")
        for bad in ["", "localhost", "1.2.3", "::g", "[::1", "127.0.0.1:80"] {
            #expect(throws: EventLoopError.invalidAddress(bad)) { _ = try SocketAddress(host: bad, port: 1) }
        }
        #expect(throws: EventLoopError.self) { _ = try SocketAddress(host: "::1", port: -1) }
    }
}

private func failure(_ outcome: Result<Connection, ConnectError>?) -> ConnectError? {
    guard case .failure(let error)? = outcome else { return nil }
    return error
}
