import Testing
import PushClient
import PushSession
import PushTestSupport
import PushWire

/// Hostile peers against the real gateway binary: the refusals and pending handshakes
/// show in its metrics, and admitted devices keep being served.
@Suite("Hostile peers against the gateway binary")
struct GatewayHostilePeerTests {
    @Test("[7] pending handshakes and refusals by reason are gauges and counters on /metrics; a device is served meanwhile")
    func refusalsInMetrics() throws {
        let gateway = try GatewayProcess(arguments: ["--metrics", "127.0.0.1:0", "--max-pending-per-address", "3",
                                                     "--handshake-timeout-ms", "1500"])
        let hostile = HostileConnections(port: gateway.service.port)
        let held = try hostile.open(3, from: "127.0.0.70")
        let over = try hostile.open(2, from: "127.0.0.70")
        #expect(hostile.waitUntilClosed(over, timeoutMs: 10_000))
        var text = ""
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            return text.contains(#"securepush_gateway_connections_refused_total{reason="pending_per_address"} 2"#)
                && text.contains("securepush_gateway_pending_handshakes 3")
        }, "metrics: \(text)")
        // A device from another address is admitted and pushed to while they wait.
        let phone = try gateway.device("phone")
        _ = try gateway.push(.device("phone"), id: "m", via: try gateway.provider())
        _ = try phone.nextPushID()
        // At the deadline they are closed with GOAWAY TIMEOUT, counted, and the gauge falls to 0.
        #expect(hostile.waitUntilClosed(held, timeoutMs: 10_000))
        #expect(waitUntil {
            text = (try? gateway.scrapeMetrics()) ?? ""
            return text.contains(#"securepush_gateway_connections_refused_total{reason="handshake_timeout"} 3"#)
                && text.contains("securepush_gateway_pending_handshakes 0")
        }, "metrics: \(text)")
    }
}
