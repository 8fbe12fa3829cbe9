#if canImport(Glibc)
import Glibc
#endif
import PushClient
import PushClock
import PushEventLoop
import PushSession
import PushWire

/// One connection of a case, over `BlockingWireClient`, with every wait bounded and every
/// socket or codec failure turned into a `CaseStop` that says what the case was doing.
///
/// A well-behaved connection drives a client `PeerSession`: `open` and `hello` make the
/// handshake through it, and the server's PINGs are answered by it and skipped unless a
/// case asks to see them, since either side may send PING at any time after the
/// handshake ([4.3-1]) and a case must not read the peer's keepalive as an answer to its
/// own request. Cases that misbehave on purpose write raw frames instead.
final class WireSession {
    let name: String
    let client: FrameChannel
    let timeoutMs: Int32
    /// Answer the server's PINGs while waiting; off for the keepalive cases, which must
    /// stay silent or observe the PING itself.
    var answersPings = true
    private var session = PeerSession<Void>(side: .client(SessionTimeouts()), now: Clocks.monotonicMilliseconds())
    /// The frame limit from HELLO_OK, which binds the server's frames too ([5.2-3]).
    var negotiatedMaxFrame: Int? { session.negotiated.map { Int($0.maxFrame) } }
    /// HELLO_OK's max_inflight, 1 until the handshake.
    var negotiatedInflight: UInt32 { session.negotiated?.maxInflight ?? 1 }
    private var stash: [Frame] = []
    private var nextCorrelation: UInt32 = 1

    init(channel: FrameChannel, name: String, timeoutMs: Int32) {
        self.name = name
        self.timeoutMs = timeoutMs
        client = channel
    }

    /// A fresh correlation id for this connection: 1, 2, 3, ... ([5.3-3]).
    func takeCorrelation() -> UInt32 {
        defer { nextCorrelation &+= 1 }
        return nextCorrelation
    }

    // MARK: sending

    func sendRaw(_ bytes: [UInt8], _ what: String = "a frame") throws(CaseStop) {
        do {
            try client.sendRaw(bytes)
        } catch {
            throw .fail("\(name): sending \(what) failed: \(error)")
        }
    }

    /// Sends `bytes` in pieces of the given sizes (the last size repeats), pausing between
    /// them so each piece reaches the peer as its own read.
    func sendChunked(_ bytes: [UInt8], sizes: [Int], pauseMs: Int = 2) throws(CaseStop) {
        var offset = 0
        var index = 0
        while offset < bytes.count {
            let size = max(1, sizes[min(index, sizes.count - 1)])
            let end = min(bytes.count, offset + size)
            try sendRaw(Array(bytes[offset..<end]), "bytes \(offset)..<\(end)")
            offset = end
            index += 1
            if offset < bytes.count { Pause.sleep(ms: pauseMs) }
        }
    }

    @discardableResult
    func send(_ message: Message, correlation: UInt32? = nil) throws(CaseStop) -> UInt32 {
        let id = correlation ?? takeCorrelation()
        try sendRaw(message.encoded(correlation: id), message.type.specName)
        return id
    }

    // MARK: receiving

    /// The next frame, or nil when none came within the time. Closing and protocol faults
    /// of the peer fail the case.
    func pollFrame(timeoutMs wait: Int32, showPings: Bool = false, waitingFor what: String) throws(CaseStop) -> Frame? {
        let deadline = Clocks.monotonicMilliseconds() + Int64(wait)
        while true {
            if let frame = nextStashed(showPings: showPings) { return frame }
            let remaining = deadline - Clocks.monotonicMilliseconds()
            guard remaining > 0 else { return nil }
            let frame: Frame
            do {
                frame = try client.receiveFrame(timeoutMs: Int32(remaining))
            } catch .timedOut {
                return nil
            } catch .closed {
                throw .fail("\(name) closed the connection while the case waited for \(what)")
            } catch .io(let code) {
                throw .fail("\(name): socket error while waiting for \(what): \(String(cString: strerror(code)))")
            } catch .wire(let error) {
                throw .fail("\(name) sent bytes that are not a valid frame while the case waited for \(what): \(error)")
            } catch {
                throw .fail("\(name): \(error) while waiting for \(what)")
            }
            if let limit = negotiatedMaxFrame, frame.header.frameLength > limit {
                throw .fail("\(name) sent a \(frame.header.frameLength)-byte frame over the negotiated maximum of \(limit) [5.2-3]")
            }
            if frame.header.type == .ping && !showPings {
                if answersPings { answerPing(frame) }
                continue
            }
            return frame
        }
    }

    /// PONG through the session once it is open; before that (a case that made its
    /// handshake by hand) the PONG is written directly.
    private func answerPing(_ frame: Frame) {
        let action = frame.body.withUnsafeBytes { session.received(frame.header, body: $0) }
        guard case .send(let pong, let correlation) = action else {
            try? client.sendRaw(Message.pong.encoded(correlation: frame.header.correlation))
            return
        }
        try? client.sendRaw(pong.encoded(correlation: correlation))
    }

    private func nextStashed(showPings: Bool) -> Frame? {
        guard let index = stash.firstIndex(where: { showPings || $0.header.type != .ping }) else { return nil }
        return stash.remove(at: index)
    }

    func nextFrame(timeoutMs wait: Int32? = nil, showPings: Bool = false, waitingFor what: String) throws(CaseStop) -> Frame {
        let limit = wait ?? timeoutMs
        guard let frame = try pollFrame(timeoutMs: limit, showPings: showPings, waitingFor: what) else {
            throw .fail("\(name) sent nothing within \(limit) ms; expected \(what)")
        }
        return frame
    }

    /// The next message, decoded; a frame the codec refuses fails the case.
    func next(timeoutMs wait: Int32? = nil, waitingFor what: String) throws(CaseStop) -> (header: FrameHeader, message: Message) {
        let frame = try nextFrame(timeoutMs: wait, waitingFor: what)
        return (frame.header, try decode(frame, what))
    }

    func decode(_ frame: Frame, _ what: String) throws(CaseStop) -> Message {
        do {
            return try Message.decode(frame)
        } catch {
            throw .fail("\(name) sent a malformed \(frame.header.type?.specName ?? "frame of type 0x\(String(frame.header.rawType, radix: 16))") while the case waited for \(what): \(error)")
        }
    }

    /// The answer to `correlation`: a non-PUSH, non-PING frame with that id, or a GOAWAY.
    /// Other frames are kept for later reads.
    func reply(to correlation: UInt32, waitingFor what: String) throws(CaseStop) -> Message {
        try decode(try replyFrame(to: correlation, waitingFor: what), what)
    }

    private func replyFrame(to correlation: UInt32, waitingFor what: String) throws(CaseStop) -> Frame {
        var kept: [Frame] = []
        defer { stash.append(contentsOf: kept) }
        // One deadline for the whole wait, so a peer that keeps sending other frames
        // cannot hold the case past its timeout.
        let deadline = Clocks.monotonicMilliseconds() + Int64(timeoutMs)
        while true {
            let remaining = deadline - Clocks.monotonicMilliseconds()
            guard remaining > 0, kept.count < 10_000 else {
                throw .fail("\(name) sent \(kept.count) other frames but no answer within \(timeoutMs) ms; expected \(what)")
            }
            let frame = try nextFrame(timeoutMs: Int32(remaining), waitingFor: what)
            let type = frame.header.type
            if type == .goaway || (frame.header.correlation == correlation && type != .push && type != .ping && type != .missed) {
                return frame
            }
            kept.append(frame)
        }
    }

    func request(_ message: Message, _ what: String? = nil) throws(CaseStop) -> Message {
        var answer: Message
        var waited: Int64 = 0
        repeat {
            if waited > 0 { Pause.sleep(ms: 1_000) }
            let id = try send(message)
            answer = try reply(to: id, waitingFor: what ?? "the answer to \(message.type.specName)")
            waited += 1_000
        } while Self.isHeldBack(message, answer) && waited <= Self.failedTokenWindowMs
        return answer
    }

    /// The window of the store's failed-token limit ([8-9]). The cases that test tokens
    /// provoke BAD_TOKEN on purpose, and runs in parallel share one client address, so
    /// a token-bearing request may meet RATE_LIMITED; it is sent again once the window
    /// has passed rather than judged.
    static let failedTokenWindowMs: Int64 = 11_000

    static func isHeldBack(_ request: Message, _ answer: Message) -> Bool {
        guard case .error(let error) = answer, error.status == .rateLimited else { return false }
        switch request {
        case .fetch(let fetch): return fetch.token != nil
        case .sync(let sync): return sync.token != nil
        case .ack(let ack): return ack.token != nil
        default: return false
        }
    }

    /// Sends HELLO through the session and returns whatever answered it.
    func hello(_ hello: Hello) throws(CaseStop) -> Message {
        let correlation = takeCorrelation()
        session = PeerSession(side: .client(SessionTimeouts()), now: Clocks.monotonicMilliseconds())
        guard case .send(let message, _) = session.start(hello, correlation: correlation) else {
            throw .fail("the client session would not start")
        }
        try send(message, correlation: correlation)
        let frame = try replyFrame(to: correlation, waitingFor: "the answer to HELLO")
        let answer = try decode(frame, "the answer to HELLO")
        _ = frame.body.withUnsafeBytes { session.received(frame.header, body: $0) }
        return answer
    }

    /// Sends HELLO and requires HELLO_OK.
    func open(_ hello: Hello) throws(CaseStop) -> HelloOK {
        let answer = try self.hello(hello)
        guard case .helloOK(let accepted) = answer else {
            throw .fail("\(name) refused a valid HELLO (\(hello.role)): \(describe(answer))")
        }
        return accepted
    }

    /// One answer per correlation id in `ids`, in any order ([5.3-2]); a second answer
    /// to one id, or an answer to none, fails the case ([4.1-1]).
    func answers(to ids: [UInt32], _ what: String) throws(CaseStop) -> [UInt32: Message] {
        var answers: [UInt32: Message] = [:]
        let wanted = Set(ids)
        while answers.count < ids.count {
            let (header, message) = try next(waitingFor: "\(ids.count - answers.count) more answers to \(what)")
            if case .goaway = message { throw .fail("\(what): the server sent \(describe(message)) after \(answers.count) of \(ids.count) answers") }
            guard wanted.contains(header.correlation) else {
                throw .fail("\(what): an answer (\(describe(message))) carried correlation \(header.correlation), which no request had")
            }
            guard answers[header.correlation] == nil else {
                throw .fail("\(what): two answers carried correlation \(header.correlation) [4.1-1]")
            }
            answers[header.correlation] = message
        }
        return answers
    }

    // MARK: expectations

    /// Fails if anything but the server's PINGs arrives within `ms`, or if the peer closes.
    func expectSilence(ms: Int32, _ why: String) throws(CaseStop) {
        if let frame = try pollFrame(timeoutMs: ms, waitingFor: "silence (\(why))") {
            let text = (try? Message.decode(frame)).map(describe) ?? "an undecodable \(frame.header.type?.specName ?? "frame")"
            throw .fail("\(name) answered \(why) with \(text)")
        }
    }

    /// A PING answered by a PONG with its correlation id, as the first frame back: the
    /// connection is open and nothing else was queued before it.
    func expectAlive(_ after: String) throws(CaseStop) {
        let id = takeCorrelation() | 0x4000_0000
        try sendRaw(Message.ping.encoded(correlation: id), "PING")
        let frame = try nextFrame(waitingFor: "PONG after \(after)")
        let message = try decode(frame, "PONG after \(after)")
        guard message == .pong, frame.header.correlation == id else {
            throw .fail("after \(after), a PING (correlation \(id)) was answered by \(describe(message)) with correlation \(frame.header.correlation)")
        }
    }

    /// Reads until the peer closes; returns what it sent first. Fails if it stays open.
    func expectClosed(within wait: Int32? = nil, _ why: String) throws(CaseStop) -> [Message] {
        let limit = wait ?? timeoutMs
        let deadline = Clocks.monotonicMilliseconds() + Int64(limit)
        var seen: [Message] = stash.compactMap { try? Message.decode($0) }
        stash = []
        while true {
            let remaining = deadline - Clocks.monotonicMilliseconds()
            guard remaining > 0 else {
                throw .fail("\(name) kept the connection open \(limit) ms after \(why)" + (seen.isEmpty ? "" : "; it sent \(seen.map(describe).joined(separator: ", "))"))
            }
            let frame: Frame
            do {
                frame = try client.receiveFrame(timeoutMs: Int32(remaining))
            } catch .closed {
                return seen
            } catch .io(let code) where code == ECONNRESET || code == EPIPE {
                return seen
            } catch .timedOut {
                continue
            } catch .wire(let error) {
                throw .fail("\(name) sent bytes that are not a valid frame after \(why): \(error)")
            } catch {
                throw .fail("\(name): \(error) after \(why)")
            }
            if frame.header.type == .ping { continue }
            let message = try decode(frame, "the close after \(why)")
            if seen.count < 100 { seen.append(message) }
        }
    }
}

/// A message as the report names it: the type, the status where there is one, and the
/// server's text for ERROR and GOAWAY.
func describe(_ message: Message) -> String {
    switch message {
    case .error(let error):
        "ERROR \(error.status.name)" + (error.message.map { " (\"\($0)\")" } ?? "")
    case .goaway(let goaway):
        "GOAWAY \(goaway.status.name)" + (goaway.message.map { " (\"\($0)\")" } ?? "")
    default:
        message.type.specName
    }
}
