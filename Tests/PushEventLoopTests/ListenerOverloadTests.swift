import Glibc
@testable import PushEventLoop
import PushTestSupport
import Testing

/// A blocking client socket connected to 127.0.0.1:`port`; the kernel completes the
/// handshake into the listener's backlog whether or not the loop runs.
private func connectedSocket(port: Int) -> Int32 {
    do {
        return try LoopbackSocket.connect(port: port)
    } catch {
        Issue.record("\(error)")
        return -1
    }
}

/// Whether the peer closed `fd` (EOF or reset) within `timeoutMs`.
private func seesClose(_ fd: Int32, timeoutMs: Int32) -> Bool {
    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&poller, 1, timeoutMs) > 0 else { return false }
    var byte: UInt8 = 0
    return recv(fd, &byte, 1, 0) <= 0
}

extension EventLoopSuite {
    @Test("at EMFILE the listener accepts and closes each waiting connection with its spare descriptor and reports them")
    func listenerRefusesWhenOutOfDescriptors() throws {
        try withEventLoop { loop in
            var accepted: [Connection] = []
            var reports: [[Int]] = []
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) {
                accepted.append($0)
                loop.stop()
            }
            listener.onRefused = { code, count in reports.append([Int(code), count]) }
            #expect(listener.reserveFD >= 0, "the spare descriptor is held from the start")
            // Three clients wait in the backlog; the loop has not run, so none was accepted.
            let waiting = (0..<3).map { _ in connectedSocket(port: listener.port) }
            defer { waiting.forEach { close($0) } }
            // What libevent reports when accept() fails for want of a descriptor.
            listener.acceptFailed(errno: EMFILE)
            #expect(reports == [[Int(EMFILE), 3]])
            for fd in waiting { #expect(seesClose(fd, timeoutMs: 2_000), "a refused client sees its connection closed at once") }
            #expect(accepted.isEmpty)
            #expect(listener.reserveFD >= 0, "the spare descriptor is taken again")
            #expect(listener.isOpen)
            // With descriptors back, the listener accepts as before.
            let next = connectedSocket(port: listener.port)
            defer { close(next) }
            runLoop(loop, timeout: .seconds(5))
            #expect(accepted.count == 1)
            accepted.forEach { $0.close() }
            listener.close()
            #expect(listener.reserveFD < 0, "close gives the spare back")
        }
    }

    @Test("at EMFILE with no connection waiting nothing is refused and the listener pauses, then accepts again")
    func listenerPausesWhenNothingWaits() throws {
        try withEventLoop { loop in
            var accepted: [Connection] = []
            var errors = 0
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) {
                accepted.append($0)
                loop.stop()
            }
            listener.onRefused = { _, _ in Issue.record("nothing was waiting to be refused") }
            listener.onAcceptError = { _ in errors += 1 }
            listener.acceptFailed(errno: EMFILE)
            #expect(errors == 1)
            let next = connectedSocket(port: listener.port)
            defer { close(next) }
            runLoop(loop, timeout: .seconds(5))
            #expect(accepted.count == 1)
            accepted.forEach { $0.close() }
            listener.close()
        }
    }
}
