import Glibc
import PushEventLoop
import PushWire
import PushTestSupport
import Testing

/// Takes nothing until told to.
private final class Quiet: ConnectionHandler {
    func onFrame(_ connection: Connection, header: FrameHeader, body: UnsafeRawBufferPointer) {}
    func onClose(_ connection: Connection, reason: CloseReason) {}
}

extension EventLoopSuite {
    /// What the gateway's stall rule reads ([5.5-7]): a peer that stops reading leaves bytes
    /// not taken (in our output or in the socket's send queue) and its count of bytes taken
    /// stands still; once it reads, the count moves.
    @Test func outputProgressShowsAPeerThatStoppedReading() throws {
        try withEventLoop { loop in
            var server: Connection?
            let listener = try Listener(loop: loop, host: "127.0.0.1", port: 0) { connection in
                connection.handler = Quiet()
                server = connection
            }
            // A peer with a small receive buffer that reads nothing for now.
            let peer = try LoopbackSocket.connect(port: listener.port, receiveBuffer: 2048)
            defer { Glibc.close(peer) }

            var stalled: [OutputProgress] = []
            var afterReading: OutputProgress?
            var timer: LoopTimer?
            timer = loop.schedule(after: .milliseconds(100), repeating: true) {
                guard let connection = server else { return }
                if stalled.isEmpty { connection.write([UInt8](repeating: 0x5A, count: 64 * 1024)) }
                if let progress = connection.outputProgress { stalled.append(progress) }
                guard stalled.count == 4 else { return }
                // The peer reads what its buffer holds, once: its TCP takes more.
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                _ = recv(peer, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                timer?.cancel()
                _ = loop.schedule(after: .milliseconds(100)) {
                    afterReading = connection.outputProgress
                    loop.stop()
                }
            }
            runLoop(loop)
            print("figures: 64 KiB to a peer with a 2 KiB receive buffer that reads nothing: \(stalled.map { "\($0.notTaken) not taken, \($0.taken) taken" }); after it reads: \(afterReading.map { "\($0.notTaken) not taken, \($0.taken) taken" } ?? "?")")
            #expect(stalled.count == 4)
            #expect(stalled.dropFirst().allSatisfy { $0.notTaken > 0 && $0.notTaken == stalled[1].notTaken && $0.taken == stalled[1].taken },
                    "a peer that reads nothing takes nothing")
            #expect(stalled[1].notTaken + Int(stalled[1].taken) >= 64 * 1024, "every byte written is either taken or waiting")
            #expect((afterReading?.notTaken ?? .max) < stalled[3].notTaken, "reading lets the peer's side take more")
            #expect((afterReading?.taken ?? 0) > stalled[3].taken, "reading moves the count of bytes taken")
            _ = listener
        }
    }
}
