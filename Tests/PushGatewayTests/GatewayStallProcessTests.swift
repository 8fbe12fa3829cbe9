import PushClient
import PushClock
import PushTestSupport
import PushWire
import Testing

extension BlockingWireClient {
    /// Everything the gateway wrote and the device had not read, read now until the gateway
    /// closes the connection or goes quiet for `quietMs`: the frames, in order.
    func unreadFrames(quietMs: Int32) -> [Message] {
        var messages: [Message] = []
        while let frame = try? receive(timeoutMs: quietMs) { messages.append(frame.message) }
        return messages
    }
}

extension [Message] {
    var pushCount: Int { count { if case .push = $0 { true } else { false } } }
    var missedFrames: [UInt32] { compactMap { if case .missed(let missed) = $0 { missed.missedCount } else { nil } } }
}

/// Issue 37, defect 7, against the real binary: a device that stops reading is closed with
/// GOAWAY SLOW_CONSUMER after the stall limit ([5.5-7]), not after the 45 s of the keepalive;
/// one that reads and does not acknowledge stays; one that reads nothing gets one MISSED
/// frame, not one per push dropped ([4.15-5]).
@Suite("The gateway binary: stalled devices and MISSED", .ownThread)
struct GatewayStallProcessTests {
    @Test("""
        [5.5-7] [4.14-7] --output-stall-ms 1000: a device that stops reading (2 KiB receive buffer) while 200 pushes \
        flow is closed with GOAWAY SLOW_CONSUMER within seconds, not after the keepalive; what it did not acknowledge \
        comes on its next connection
        """)
    func stoppedReaderIsClosed() throws {
        let gateway = try GatewayProcess(arguments: ["--output-stall-ms", "1000", "--metrics", "127.0.0.1:0"])
        let provider = try gateway.provider()
        let stalled = try gateway.device("phone", receiveBufferBytes: 2048)
        let ids = (0..<200).map { longID("s", $0) }
        let start = Clocks.monotonicMilliseconds()
        let acks = try gateway.pushAll(ids, to: .device("phone"), via: provider)
        let written = acks.map(\.written).reduce(0, +)
        #expect(waitUntil(timeoutSeconds: 10, pollMilliseconds: 20) {
            metricValue((try? gateway.scrapeMetrics()) ?? "", "securepush_gateway_slow_consumers_cut_total") == 1
        })
        let cutAfterMs = Clocks.monotonicMilliseconds() - start
        // The limit, half of it before the first look, two sweeps of 250 ms: 2 s at most, and slack.
        #expect(cutAfterMs >= 1_000 && cutAfterMs < 5_000, "closed \(cutAfterMs) ms after the pushes began")

        // What the gateway wrote before the close, the GOAWAY last, is still readable.
        let frames = stalled.unreadFrames(quietMs: 2_000)
        print("figures: binary, stall limit 1000 ms, 200 pushes to a device that stopped reading: cut after \(cutAfterMs) ms; it then read \(frames.pushCount) PUSH, MISSED \(frames.missedFrames), last \(frames.last.map { "\($0.type)" } ?? "nothing")")
        #expect(frames.pushCount == written, "the pushes PUSH_ACK said were written")
        guard case .goaway(let goaway)? = frames.last else { Issue.record("no GOAWAY last: \(String(describing: frames.last))"); return }
        #expect(goaway.status == .slowConsumer)
        #expect(stalled.waitForClose(timeoutMs: 2_000))

        let back = try gateway.device("phone")
        let (delivered, missed) = back.collect(accountingFor: ids.count)
        #expect(delivered.count + missed == ids.count, "every push delivered or counted on the next connection [4.14-7]")
        #expect(delivered == Array(ids.suffix(delivered.count)), "the newest kept, in order")
    }

    @Test("""
        [5.5-7] [4.14-5] --output-stall-ms 1000: a device that reads everything and acknowledges nothing, with pushes \
        still coming, is not closed after three times the limit and is still served
        """)
    func readerThatDoesNotAcknowledgeStays() throws {
        let gateway = try GatewayProcess(arguments: ["--output-stall-ms", "1000", "--metrics", "127.0.0.1:0"])
        let provider = try gateway.provider()
        let phone = try gateway.device("phone")
        var received = 0
        var missed = 0
        var sent = 0
        let start = Clocks.monotonicMilliseconds()
        while Clocks.monotonicMilliseconds() - start < 3_000 {
            let ids = (sent..<(sent + 20)).map { longID("a", $0) }
            sent += ids.count
            _ = try gateway.pushAll(ids, to: .device("phone"), via: provider)
            for message in phone.unreadFrames(quietMs: 100) {
                switch message {
                case .push: received += 1
                case .missed(let report): missed += Int(report.missedCount)
                default: Issue.record("the device got \(message)")
                }
            }
        }
        let text = try gateway.scrapeMetrics()
        print("figures: binary, stall limit 1000 ms, a device that reads and never acknowledges for 3 s: \(sent) sent, \(received) written, MISSED \(missed) while connected")
        #expect(metricValue(text, "securepush_gateway_slow_consumers_cut_total") == 0)
        #expect(metricValue(text, "securepush_gateway_devices_online") == 1)
        #expect(received == 64, "the window")
        #expect(missed >= 1, "the first drop is told at once")
        #expect(try gateway.push(.device("phone"), id: "still-served", via: provider) == PushAck(written: 0, queued: 1))
    }

    @Test("""
        [4.15-5] [4.15-1] 3,000 pushes to a connected device that reads nothing (queue 100, window 64): when it reads at \
        last it finds one MISSED frame, not thousands; acknowledging brings the rest of the count in one more
        """)
    func oneMissedForADeviceThatReadsNothing() throws {
        let gateway = try GatewayProcess(arguments: ["--metrics", "127.0.0.1:0"])
        let provider = try gateway.provider()
        let phone = try gateway.device("phone", receiveBufferBytes: 2048)
        let ids = (0..<3_000).map { longID("m", $0) }
        let acks = try gateway.pushAll(ids, to: .device("phone"), via: provider)
        #expect(acks.allSatisfy { $0.written + $0.queued == 1 })

        var frames: [(correlation: UInt32, message: Message)] = []
        while let frame = try? phone.receive(timeoutMs: 500) { frames.append((frame.header.correlation, frame.message)) }
        let messages = frames.map(\.message)
        print("figures: binary, 3,000 pushes to a device that read nothing until the end: it found \(messages.pushCount) PUSH and \(messages.missedFrames.count) MISSED frames (counts \(messages.missedFrames.prefix(5)))")
        #expect(messages.pushCount == 64)
        #expect(messages.missedFrames == [1], "one MISSED frame, for the first drop")

        for case (let correlation, .push(let push)) in frames {
            _ = try phone.send(.deliveryAck(DeliveryAck(id: push.id)), correlation: correlation)
        }
        let (rest, missedLater) = phone.collect(accountingFor: ids.count - 64 - 1)
        #expect(missedLater == 3_000 - 64 - 100 - 1, "the held count, in one more MISSED")
        #expect(rest == Array(ids.suffix(100)), "the 100 the queue kept, once, in order")
        #expect(metricValue(try gateway.scrapeMetrics(), "securepush_gateway_slow_consumers_cut_total") == 0)
    }
}
