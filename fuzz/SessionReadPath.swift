import PushSession
import PushWire

// libFuzzer target over a server connection's read path, as the event loop drives it:
// the input is split at points drawn from itself into reads, each read goes through
// `FrameDecoder.decode` with the session's current frame limit, and each frame to a real
// server `PeerSession` through `received`; its actions are carried out the way
// `ServiceHost` does (admit or refuse HELLO, answer served requests, stop on close), and
// the timer fires between reads.
//
// Input: byte 0 holds flags (bit 0: open with a valid HELLO so the stream runs past the
// handshake; bit 1: the gateway's requests instead of the store's; bit 2: refuse the
// credential; bit 3: leave served requests unanswered), bytes 1...4 seed the split
// points and the clock, the rest is the stream.

let storeServed: Set<MessageType> = [.login, .store, .fetch, .sync, .ack, .recall, .status]
let gatewayServed: Set<MessageType> = [.push]
let openingHello = Message.hello(Hello(role: .device, maxFrame: 4096, keepaliveMs: 1_000, maxInflight: 4)).encoded(correlation: 1)

/// Carries out one action; false once the connection is to close.
func perform(_ action: SessionAction, on session: inout PeerSession<Int>, refuse: Bool, answer: Bool, now: Int64) -> Bool {
    switch action {
    case .none, .deliver, .ready, .refused, .malformedReply, .goaway:
        return true
    case .send(let message, let correlation):
        _ = message.encoded(correlation: correlation)
        session.sent(now: now)
        return true
    case .sendAndClose(let message, let correlation):
        _ = message.encoded(correlation: correlation)
        return false
    case .close:
        return false
    case .serve(let message, _):
        precondition(message.type.isRequest, "served a \(message.type), which is no request")
        if answer { session.answered(now: now) }
        return true
    case .checkCredential:
        let next = refuse ? session.refuse(.badCredentials, "refused by the fuzzer") : session.admit(7)
        return perform(next, on: &session, refuse: refuse, answer: answer, now: now)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSessionReadPath(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 5 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let flags = input[0]
    var random = SplitMix(state: UInt64(input[1]) << 24 | UInt64(input[2]) << 16 | UInt64(input[3]) << 8 | UInt64(input[4]))
    let stream = (flags & 1 != 0 ? openingHello : []) + input[5...]
    let refuse = flags & 4 != 0
    let answer = flags & 8 == 0

    var limits = ServiceLimits(name: "fuzz", served: flags & 2 != 0 ? gatewayServed : storeServed)
    limits.keepaliveMs = 1_000
    limits.maxInflight = 4
    limits.timeouts = SessionTimeouts(handshakeMs: 5_000, frameMs: 10_000)
    var session = PeerSession<Int>(side: .server(limits, overConnectionLimit: random.next() % 8 == 0), now: 0)
    var decoder = FrameDecoder()
    var now: Int64 = 0
    var open = true
    var start = stream.startIndex
    while open && start < stream.endIndex {
        let end = min(stream.endIndex, start + Int(random.next() % 64) + 1)
        let read = stream[start..<end]
        start = end
        now += Int64(random.next() % 300)
        let limit = session.negotiated.map { Int($0.maxFrame) } ?? FrameLimits.defaultMaxFrame
        let failure: WireError? = read.withUnsafeBytes { bytes in
            do throws(WireError) {
                try decoder.decode(bytes, maxFrame: limit) { header, body in
                    open = perform(session.received(header, body: body), on: &session, refuse: refuse, answer: answer, now: now)
                    return open
                }
                return nil
            } catch {
                return error
            }
        }
        if let error = failure {
            // A framing error always ends the connection, whatever the session sends first.
            _ = perform(session.framingError(error), on: &session, refuse: refuse, answer: answer, now: now)
            open = false
        }
        guard open else { break }
        let partial: Int64? = decoder.holdsPartialFrame ? now - Int64(random.next() % 20_000) : nil
        open = perform(session.timerFired(now: now, lastReceivedAt: now, partialFrameSince: partial), on: &session,
                       refuse: refuse, answer: answer, now: now)
    }
    if !open { precondition(session.phase == .closed || session.phase == .draining, "the session asked to close but is \(session.phase)") }
    return 0
}
