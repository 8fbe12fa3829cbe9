import Glibc
import PushEventLoop
import PushTestSupport
import Testing

/// Just enough of a PostgreSQL server, on the test's loop, to complete libpq's startup
/// handshake as a read-only server (AuthenticationOk, then ParameterStatus
/// default_transaction_read_only=on): a client that wants a read-write session hangs up
/// and tries its next host. Expects sslmode=disable and gssencmode=disable.
final class ReadOnlyServer {
    let port: Int
    private(set) var handshakes = 0
    private let listener: Int32
    private var acceptWatch: FileDescriptorWatch?
    private var clients: [Int32: (watch: FileDescriptorWatch, received: [UInt8])] = [:]
    private let loop: EventLoop

    init(loop: EventLoop) throws {
        self.loop = loop
        (listener, port) = try LoopbackSocket.listen(backlog: 8, nonBlocking: true)
        acceptWatch = try loop.watch(fd: listener, onReadable: { [unowned self] in accepted() }, onWritable: {})
    }

    func stop() {
        acceptWatch?.cancel()
        for (fd, client) in clients {
            client.watch.cancel()
            close(fd)
        }
        clients = [:]
        close(listener)
    }

    private func accepted() {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        guard let watch = try? loop.watch(fd: fd, onReadable: { [unowned self] in readable(fd) }, onWritable: {}) else {
            close(fd)
            return
        }
        clients[fd] = (watch, [])
    }

    private func readable(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else {
            clients[fd]?.watch.cancel()
            clients[fd] = nil
            close(fd)
            return
        }
        clients[fd]?.received += buffer[..<count]
        guard let received = clients[fd]?.received, received.count >= 8 else { return }
        let length = Int(received[0]) << 24 | Int(received[1]) << 16 | Int(received[2]) << 8 | Int(received[3])
        // The startup packet, complete: answer it once; the client's Terminate and close follow.
        guard received.count >= length, handshakesAnswered.insert(fd).inserted else { return }
        handshakes += 1
        var reply = message("R", int32(0))
        for (name, value) in [("server_version", "15.0"), ("default_transaction_read_only", "on"), ("in_hot_standby", "off")] {
            reply += message("S", Array(name.utf8) + [0] + Array(value.utf8) + [0])
        }
        reply += message("K", int32(4242) + int32(1))
        reply += message("Z", [UInt8(ascii: "I")])
        _ = reply.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    private var handshakesAnswered: Set<Int32> = []

    private func message(_ type: Character, _ body: [UInt8]) -> [UInt8] {
        [type.asciiValue ?? 0] + int32(Int32(body.count + 4)) + body
    }

    private func int32(_ value: Int32) -> [UInt8] {
        let bits = UInt32(bitPattern: value)
        return [UInt8(bits >> 24), UInt8(truncatingIfNeeded: bits >> 16), UInt8(truncatingIfNeeded: bits >> 8), UInt8(truncatingIfNeeded: bits)]
    }
}
