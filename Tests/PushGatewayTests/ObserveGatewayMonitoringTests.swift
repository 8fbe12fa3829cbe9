import Foundation
import PushClient
import PushSecurity
import PushService
import PushTestSupport
import PushWire
import Testing

/// Every line of a service's stderr as a JSON object (a line that is not one fails the test).
private func jsonLogLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { line in
        let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object != nil, "not a JSON log line: \(line)")
        return object
    }
}

@Suite("The gateway's metrics, health endpoints and logs", .ownThread)
struct ObserveGatewayMonitoringTests {
    @Test("after real traffic /metrics parses strictly, every family has HELP, the PUSH and delivery histograms moved; a refused registration is logged as JSON and counted")
    func metricsAndLogsAfterTraffic() throws {
        let gateway = try GatewayProcess(arguments: ["--metrics", "127.0.0.1:0", "--log-format", "json"])
        let port = try #require(gateway.service.announcedMetricsPort)
        let phone = try gateway.device("phone")
        let provider = try gateway.provider()
        for index in 0..<3 {
            _ = try gateway.push(.device("phone"), id: "m\(index)", via: provider)
            #expect(try phone.nextPushID() == "m\(index)")
        }
        let stranger = try gateway.reachable.connect()
        let forged = Registration(deviceID: "x", user: "mallory", tags: [], issuedAt: 0, expiresAt: .max)
            .signed(by: CredentialSigner(serverKey: SecretKey(bytes: Array(repeating: 9, count: 32))!, purpose: CredentialSigner.registrationPurpose))
        if case .helloOK = try stranger.hello(Hello(role: .device, credential: forged)) { Issue.record("a forged registration was admitted") }

        var parsed = try MetricsExposition(parsing: try HTTPGet.metrics(port: port))
        #expect(waitUntil {
            // The last DELIVERY_ACK may still be on its way.
            parsed = (try? MetricsExposition(parsing: (try? HTTPGet.metrics(port: port)) ?? "")) ?? parsed
            return parsed.histogramCount("securepush_gateway_delivery_duration_seconds") == 3
        })
        for family in parsed.families { #expect(!(family.help ?? "").isEmpty, "\(family.name) has no HELP") }
        #expect(parsed.histogramCount("securepush_gateway_push_duration_seconds") == 3)
        #expect(parsed.value("securepush_gateway_pushes_acknowledged_total") == 3)
        #expect(parsed.value("securepush_gateway_devices_online") == 1)
        #expect(parsed.value("securepush_gateway_connections") == 2)
        #expect(parsed.value("securepush_gateway_hellos_refused_total", ["status": "bad_credentials"]) == 1)
        #expect(parsed.value("securepush_gateway_credentials_refused_total", ["role": "device", "reason": "bad"]) == 1)
        #expect(parsed.value("securepush_gateway_credentials_refused_total", ["role": "provider", "reason": "replayed"]) == 0)
        #expect(!parsed.families.contains { $0.name.hasPrefix("securepush_gateway_registry") }, "no registry without --store")
        #expect(parsed.value("process_open_fds") ?? 0 > 0)
        let text = try HTTPGet.metrics(port: port)
        if PrometheusTools.promtool != nil { #expect(try PrometheusTools.promtoolProblems(text) == nil) }
        if PrometheusTools.pythonWithClient != nil {
            #expect(try PrometheusTools.pythonParse(text).contains("securepush_gateway_delivery_duration_seconds histogram 20"))
        }

        #expect(try HTTPGet.fetch(port: port, path: "/healthz").status == 200)
        #expect(try HTTPGet.fetch(port: port, path: "/readyz").body == "ready\n")
        #expect(gateway.service.terminate() == 0)
        let lines = jsonLogLines(gateway.service.standardErrorText())
        let refusal = try #require(lines.first { $0["message"] as? String == "hello refused" })
        let metadata = refusal["metadata"] as? [String: Any]
        #expect(refusal["level"] as? String == "info")
        #expect(metadata?["peer"] as? String == "127.0.0.1")
        #expect((metadata?["reason"] as? String)?.hasPrefix("registration refused: ") == true, "\(metadata ?? [:])")
    }

    @Test("/readyz is 503 with the reason while the gateway drains")
    func notReadyWhileDraining() throws {
        let gateway = try RunningGateway()
        let port = try #require(gateway.service.onLoop { try? $0.startMonitoring(host: "127.0.0.1", port: 0).port } ?? nil)
        #expect(try HTTPGet.fetch(port: port, path: "/readyz").status == 200)
        gateway.service.onLoop { $0.drain {} }
        let draining = try HTTPGet.fetch(port: port, path: "/readyz")
        #expect(draining.status == 503)
        #expect(draining.body == "not ready: draining: the gateway is shutting down\n")
        #expect(try HTTPGet.fetch(port: port, path: "/healthz").status == 200)
    }

    @Test("the config file's gateway.metrics and log_format apply without flags")
    func configFallbacks() throws {
        let deployment = try TemporaryDeployment(commandLine: true)
        let config = deployment.directory + "/" + Deployment.configFile
        let original = try String(contentsOfFile: config, encoding: .utf8)
        try Deployment.writePrivate(config, original + "gateway.metrics = 127.0.0.1:0\ngateway.log_format = json\n")
        let service = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
        let port = try #require(service.announcedMetricsPort)
        #expect(try HTTPGet.fetch(port: port, path: "/healthz").status == 200)
        #expect(service.terminate() == 0)
        #expect(jsonLogLines(service.standardErrorText()).contains { $0["message"] as? String == "gateway ready" })
    }
}
