import PushTestSupport
import Testing

/// The monitoring endpoint's own refusals, counted in its /metrics, on a real store process.
@Suite("Monitoring endpoint refusals, as a process", .ownThread, .serialized)
struct MonitoringRefusalProcessTests {
    /// The endpoint's cap (MonitoringEndpoint.defaultMaxConnections) and request deadline;
    /// neither is a flag.
    static let cap = 128
    static let deadlineSeconds = 5.0

    @Test("one connection over the monitoring cap is answered 503 and counted in securepush_monitoring_refused_at_cap_total")
    func overTheCapIsCounted() throws {
        let deployment = try TemporaryDeployment()
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--metrics", "127.0.0.1:0"])
        defer { _ = store.terminate() }
        let port = try #require(store.announcedMetricsPort)
        #expect(store.metric("securepush_monitoring_refused_at_cap_total") == 0)
        do {
            let held = try (0..<Self.cap).map { _ in try HTTPTestConnection(port: port) }
            try withExtendedLifetime(held) {
                // Accepted behind the held ones, so over the cap: the 503 comes without a request.
                let refused = try HTTPTestConnection(port: port, timeoutMs: 5_000).readResponse()
                #expect(refused.status == 503)
            }
            // Closed by the endpoint once it read their end, well within the deadline (none
            // is counted there), so the GET of /metrics below is not over the cap too.
            for connection in held { connection.finishSending() }
            #expect(held.allSatisfy { $0.waitForClose() })
        }
        #expect(waitUntil { store.metric("securepush_monitoring_refused_at_cap_total") == 1 })
        #expect(store.metric("securepush_monitoring_deadline_closes_total") == 0)
    }

    @Test("a client that sends half a request is closed at the 5 s deadline and counted in securepush_monitoring_deadline_closes_total")
    func slowClientIsCounted() throws {
        let deployment = try TemporaryDeployment()
        let store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--metrics", "127.0.0.1:0"])
        defer { _ = store.terminate() }
        let port = try #require(store.announcedMetricsPort)
        let slow = try HTTPTestConnection(port: port, timeoutMs: Int((Self.deadlineSeconds + 5) * 1000))
        try slow.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        #expect(slow.waitForClose(), "closed once the deadline passed")
        #expect(waitUntil { store.metric("securepush_monitoring_deadline_closes_total") == 1 })
        #expect(store.metric("securepush_monitoring_refused_at_cap_total") == 0)
    }
}
