import Foundation
import Glibc
import PushClient
import PushProcess
import PushSecurity
import PushService
import PushStore
import PushTestSupport
import PushWire
import Testing

/// `securepush store` with its monitoring endpoint, as a child process.
private final class MonitoredStore: StoreUnderTest {
    let deployment: TemporaryDeployment
    let service: ServiceProcess

    init(_ arguments: [String] = ["--metrics", "127.0.0.1:0", "--log-format", "json"]) throws {
        deployment = try deploymentWithUsers(commandLine: true)
        service = try ServiceProcess(["store", "--data-dir", deployment.directory] + arguments)
    }

    var reachable: any ReachableService { service }

    var monitoringPort: Int {
        get throws { try #require(service.announcedMetricsPort) }
    }
}

/// Every line of a service's stderr as a JSON object (a line that is not one fails the test).
private func jsonLogLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { line in
        let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object != nil, "not a JSON log line: \(line)")
        return object
    }
}

@Suite("The store's metrics, health endpoints and logs", .ownThread)
struct ObserveStoreMonitoringTests {
    @Test("after real traffic /metrics parses strictly, every family has HELP, the STORE and FETCH histograms moved, a failed login is counted and logged as JSON without the password")
    func metricsAndLogsAfterTraffic() throws {
        let store = try MonitoredStore()
        let provider = try store.provider()
        let id = try store.store("hello", via: provider)
        let device = try store.device()
        let refused = try device.request(.login(Login(user: "alice", password: Array("not-alices-secret".utf8), deviceID: "phone")))
        #expect(errorStatus(refused) == .badCredentials)
        let token = try store.login("alice")
        guard case .fetchOK = try device.request(.fetch(Fetch(id: id, token: token))) else { Issue.record("FETCH failed"); return }
        #expect(errorStatus(try device.request(.fetch(Fetch(id: PayloadID(high: 1, low: 2), token: token)))) == .notFound)

        let port = try store.monitoringPort
        let text = try HTTPGet.metrics(port: port)
        let parsed = try MetricsExposition(parsing: text)
        for family in parsed.families { #expect(!(family.help ?? "").isEmpty, "\(family.name) has no HELP") }
        #expect(parsed.histogramCount("securepush_store_request_duration_seconds", ["type": "store"]) == 1)
        #expect(parsed.histogramCount("securepush_store_request_duration_seconds", ["type": "fetch"]) == 2)
        #expect(parsed.histogramCount("securepush_store_request_duration_seconds", ["type": "login"]) == 2)
        #expect(parsed.value("securepush_store_requests_total", ["type": "fetch", "status": "ok"]) == 1)
        #expect(parsed.value("securepush_store_requests_total", ["type": "fetch", "status": "not_found"]) == 1)
        #expect(parsed.value("securepush_store_requests_total", ["type": "login", "status": "bad_credentials"]) == 1)
        #expect(parsed.value("securepush_store_payloads_stored_total") == 1)
        #expect(parsed.value("securepush_store_logins_failed_total") == 1)
        #expect(parsed.value("securepush_store_rate_limited_total", ["type": "login"]) == 0)
        #expect(try #require(parsed.value("securepush_store_connections")) >= 2)
        #expect(parsed.value("securepush_store_connections_refused_total", ["reason": "pending_per_address"]) == 0)
        #expect(parsed.value("securepush_store_pending_handshakes") == 0)
        #expect(try #require(parsed.value("process_resident_memory_bytes")) > 0)
        #expect(parsed.family("securepush_build_info")?.samples.first?.labels["version"]?.isEmpty == false)
        if PrometheusTools.promtool != nil { #expect(try PrometheusTools.promtoolProblems(text) == nil) }
        if PrometheusTools.pythonWithClient != nil {
            #expect(try PrometheusTools.pythonParse(text).contains("securepush_store_request_duration_seconds histogram \(StoreServer.served.count * 20)"))
        }

        #expect(try HTTPGet.fetch(port: port, path: "/healthz").status == 200)
        let ready = try HTTPGet.fetch(port: port, path: "/readyz")
        #expect(ready.status == 200 && ready.body == "ready\n")

        var failedLogin: [String: Any]?
        #expect(waitUntil {
            failedLogin = jsonLogLines(store.service.standardErrorText()).first { $0["message"] as? String == "login failed" }
            return failedLogin != nil
        })
        let metadata = failedLogin?["metadata"] as? [String: Any]
        #expect(failedLogin?["level"] as? String == "info")
        #expect(metadata?["user"] as? String == "alice")
        #expect(metadata?["peer"] as? String == "127.0.0.1")
        #expect(store.service.terminate() == 0)
        let logs = store.service.standardErrorText()
        #expect(!logs.contains("not-alices-secret"), "a password in the logs")
        let messages = jsonLogLines(logs).compactMap { $0["message"] as? String }
        #expect(messages.contains("store ready") && messages.contains("store stopped"), "\(messages)")
    }

    @Test("failed logins are logged one by one with user, address and reason; the rate-limit trip after them is logged and counted")
    func failedLoginsAndRateLimit() throws {
        let log = CapturedLog()
        let store = try RunningStore { $0.logger = log.logger(label: "securepush.store", level: .info) }
        let device = try store.device()
        let wrong = Message.login(Login(user: "alice", password: Array("guess".utf8), deviceID: "phone"))
        // Three failures of one (user, address) pair are checked; the fourth waits ([8-10]).
        for _ in 0..<3 { #expect(errorStatus(try device.request(wrong)) == .badCredentials) }
        #expect(errorStatus(try device.request(wrong)) == .rateLimited)
        #expect(waitUntil { log.text.contains("rate limited") })
        let lines = log.text.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("info login failed") && $0.contains("user=alice") && $0.contains("peer=127.0.0.1")
                               && $0.contains("reason=unknown user or wrong password") }.count == 3)
        #expect(lines.contains { $0.hasPrefix("info rate limited") && $0.contains("request=LOGIN") && $0.contains("user=alice") })
        #expect(!log.text.contains("guess"))
        let parsed = try MetricsExposition(parsing: store.service.onLoop { $0.metrics.text } ?? "")
        #expect(parsed.value("securepush_store_logins_failed_total") == 3)
        #expect(parsed.value("securepush_store_rate_limited_total", ["type": "login"]) == 1)
        #expect(parsed.value("securepush_store_requests_total", ["type": "login", "status": "rate_limited"]) == 1)
    }

    @Test("/readyz is 503 with the reason while the store drains")
    func notReadyWhileDraining() throws {
        let store = try RunningStore()
        let port = try #require(store.service.onLoop { try? $0.startMonitoring(host: "127.0.0.1", port: 0).port } ?? nil)
        #expect(try HTTPGet.fetch(port: port, path: "/readyz").status == 200)
        store.service.onLoop { $0.drain {} }
        let draining = try HTTPGet.fetch(port: port, path: "/readyz")
        #expect(draining.status == 503)
        #expect(draining.body.hasPrefix("not ready: draining"), "\(draining.body)")
        #expect(try HTTPGet.fetch(port: port, path: "/healthz").status == 200)
    }

    @Test("the config file's store.metrics and log_format apply without flags; a bad log_format is refused with a clear line")
    func configFallbacks() throws {
        let deployment = try deploymentWithUsers(commandLine: true)
        let config = deployment.directory + "/securepush.conf"
        let original = try String(contentsOfFile: config, encoding: .utf8)
        try Deployment.writePrivate(config, original + "store.metrics = 127.0.0.1:0\nlog_format = json\nstore.log_level = debug\n")
        let service = try ServiceProcess(["store", "--data-dir", deployment.directory])
        let port = try #require(service.announcedMetricsPort)
        #expect(try HTTPGet.fetch(port: port, path: "/readyz").status == 200)
        #expect(service.terminate() == 0)
        #expect(!jsonLogLines(service.standardErrorText()).isEmpty)

        try Deployment.writePrivate(config, original + "log_format = yaml\n")
        let refused = try SecurePushBinary.run(["store", "--data-dir", deployment.directory, "--listen", "127.0.0.1:0"], timeoutSeconds: 30)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("log_format = 'yaml': expected text or json"), "\(refused.stderr)")
    }

    /// As root, a directory's mode does not stop writes: the store then runs as nobody,
    /// which needs setpriv and a binary that others may reach and run.
    static let canMakeUnwritable = geteuid() != 0
        || (FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && othersCanRun(SecurePushBinary.path))

    private static func othersCanRun(_ path: String) -> Bool {
        var current = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        while true {
            var info = stat()
            guard stat(current.path, &info) == 0, info.st_mode & 0o001 != 0 else { return false }
            guard current.path != "/" else { return true }
            current.deleteLastPathComponent()
        }
    }

    @Test("/readyz is 503 while the data directory cannot take writes, and 200 again once it can", .enabled(if: canMakeUnwritable))
    func notReadyWhenDataDirectoryUnwritable() throws {
        let deployment = try deploymentWithUsers(commandLine: true)
        let storeArguments = ["store", "--data-dir", deployment.directory, "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]
        let child: ChildProcess
        if geteuid() == 0 {
            let nobody: UInt32 = 65534
            for path in try [deployment.directory] + FileManager.default.contentsOfDirectory(atPath: deployment.directory).map({ deployment.directory + "/" + $0 }) {
                #expect(chown(path, nobody, nobody) == 0)
            }
            child = try ChildProcess(executable: "/usr/bin/setpriv",
                                     arguments: ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", SecurePushBinary.path] + storeArguments)
        } else {
            child = try ChildProcess(executable: SecurePushBinary.path, arguments: storeArguments)
        }
        _ = try child.waitForLine(prefix: "listening on ", seconds: 30)
        let metricsLine = try #require(child.standardOutput.split(separator: "\n").first { $0.hasPrefix("metrics on ") })
        let port = try #require(Int(metricsLine.split(separator: ":").last ?? ""))
        #expect(try HTTPGet.fetch(port: port, path: "/readyz").status == 200)

        #expect(chmod(deployment.directory, 0o500) == 0)
        var answer: HTTPGetResult?
        #expect(waitUntil { answer = try? HTTPGet.fetch(port: port, path: "/readyz"); return answer?.status == 503 })
        #expect(answer?.body.hasPrefix("not ready: cannot write in \(deployment.directory): Permission denied") == true, "\(answer?.body ?? "")")
        #expect(try HTTPGet.fetch(port: port, path: "/healthz").status == 200)

        #expect(chmod(deployment.directory, 0o700) == 0)
        #expect(waitUntil { (try? HTTPGet.fetch(port: port, path: "/readyz"))?.status == 200 })
        child.signal(SIGTERM)
        #expect(child.wait(seconds: 15) == 0)
    }
}
