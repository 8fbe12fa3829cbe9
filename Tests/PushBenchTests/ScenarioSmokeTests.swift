import Foundation
import PushTestSupport
import Testing

/// Every scenario end to end through the command line, embedded mode, tiny loads: the
/// JSON has the keys scripts rely on, nothing failed, and something was measured.
@Suite(.ownThread, .serialized)
struct ScenarioSmokeTests {
    static let quick = ["--warmup", "0", "--no-progress", "--json"]

    @Test func store() throws {
        try expectClean("store", ["--count", "200", "--connections", "2", "--inflight", "8"])
    }

    @Test func fetch() throws {
        try expectClean("fetch", ["--count", "200", "--connections", "2", "--inflight", "8"])
    }

    @Test func push() throws {
        let json = try expectClean("push", ["--count", "200", "--devices", "20", "--inflight", "8"])
        #expect(json["gateways"] as? Int == 1)
        #expect(json["nats"] as? Bool == false, "one plain gateway, no cluster")
        // Present, not positive: /proc counts CPU in 10 ms ticks, and 200 pushes may take fewer.
        #expect(json["cpu_us_per_delivery"] is Double, "the gateway's CPU per delivery: \(json)")
        #expect(json["nats_in_msgs_per_push"] == nil)
    }

    @Test func fanout() throws {
        try expectClean("fanout", ["--count", "5", "--devices", "50", "--rate", "20"])
    }

    @Test func endToEnd() throws {
        try expectClean("e2e", ["--count", "200", "--devices", "20", "--inflight", "8"])
    }

    @Test func endToEndBySend() throws {
        let json = try expectClean("e2e", ["--send", "--count", "200", "--devices", "20", "--inflight", "8"])
        #expect(json["request"] as? String == "send")
    }

    /// [7.6-5] [4.19-4] Every device registers a key, every payload is sealed to it, and every
    /// FETCH_OK's view opens to the payload's length (an error otherwise).
    @Test(arguments: [[String](), ["--send", "--key-suite", "xwing"]])
    func endToEndSealed(extra: [String]) throws {
        let json = try expectClean("e2e", ["--sealed", "--count", "100", "--devices", "10", "--inflight", "8"] + extra)
        #expect(json["sealed"] as? String == (extra.isEmpty ? "x25519" : "xwing"))
        let seal = try #require(json["seal_us_per_message"] as? Double)
        let open = try #require(json["open_us_per_message"] as? Double)
        #expect(seal > 0 && open > 0, "\(json)")
    }

    @Test func endToEndKeySuiteNeedsSealed() throws {
        let result = try SecurePushBinary.run(["bench", "e2e", "--key-suite", "xwing", "--count", "1"], timeoutSeconds: 30)
        #expect(result.status != 0)
        #expect(result.stderr.contains("--key-suite is for --sealed"), "\(result.stderr)")
    }

    @Test func endToEndOpenLoop() throws {
        try expectClean("e2e", ["--count", "200", "--devices", "20", "--rate", "1000"])
    }

    @Test func connections() throws {
        // No warm-up: the connections are only held.
        let json = try expectClean("connections", ["--connections", "100", "--duration", "0.2"], quick: ["--no-progress", "--json"])
        let perConnection = try #require(json["bytes_per_connection"] as? Double)
        #expect(perConnection > 0)
        #expect(json["operations"] as? Double == 100)
    }

    @Test func http() throws {
        let json = try expectClean("http", ["--count", "200", "--connections", "2"])
        #expect(json["request"] as? String == "http")
        #expect(json["operations"] as? Double == 200)
        let throughput = try #require(json["throughput_per_s"] as? Double)
        #expect(throughput > 0)
        let store = try #require(json["store"] as? String)
        #expect(store.hasPrefix("http://127.0.0.1:"), "\(store)")
    }

    @Test func httpOpenLoop() throws {
        let json = try expectClean("http", ["--rate", "200", "--duration", "1", "--connections", "4"])
        #expect(json["rate"] as? Double == 200)
        let operations = try #require(json["operations"] as? Double)
        // 200/s for 1 s: never more than the rate asked for. Fewer when a loaded machine
        // keeps every connection's one request waiting longer than 20 ms, so no lower bound
        // beyond some: how many is a benchmark's figure, not a test's.
        #expect(operations > 0 && operations <= 201, "\(operations)")
    }

    @Test func httpRefusesForeignTargetsAndPipelining() throws {
        let remote = try SecurePushBinary.run(["bench", "http", "--http-url", "http://192.0.2.1:8080", "--api-token", "x"] + Self.quick)
        #expect(remote.status != 0)
        #expect(remote.stderr.contains("127.0.0.1"), "\(remote.stderr)")
        let pipelined = try SecurePushBinary.run(["bench", "http", "--inflight", "4"] + Self.quick)
        #expect(pipelined.status != 0)
        #expect(pipelined.stderr.contains("--inflight"), "\(pipelined.stderr)")
        guard ProcessInfo.processInfo.environment["SECUREPUSH_API_TOKEN"] == nil else { return }
        let tokenless = try SecurePushBinary.run(["bench", "http", "--http-url", "http://127.0.0.1:9"] + Self.quick)
        #expect(tokenless.status != 0)
        #expect(tokenless.stderr.contains("--api-token"), "\(tokenless.stderr)")
    }

    @Test func badValueIsOneLineAndForeignFlagsAreRefused() throws {
        let result = try SecurePushBinary.run(["bench", "store", "--inflight", "0"])
        #expect(result.status != 0)
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        let unknown = try SecurePushBinary.run(["bench", "store", "--no-such-flag"])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.hasPrefix("Error: Unknown option '--no-such-flag'"), "\(unknown.stderr)")
        // Another scenario's flag is not this one's.
        let foreign = try SecurePushBinary.run(["bench", "store", "--devices", "5"])
        #expect(foreign.status != 0)
        #expect(foreign.stderr.hasPrefix("Error: Unknown option '--devices'"), "\(foreign.stderr)")
    }

    @discardableResult
    private func expectClean(_ scenario: String, _ flags: [String], quick: [String] = ScenarioSmokeTests.quick) throws -> [String: Any] {
        let result = try SecurePushBinary.run(["bench", scenario] + flags + quick, timeoutSeconds: 60)
        #expect(result.status == 0, "\(scenario): \(result.stderr)")
        let line = try #require(result.stdout.split(separator: "\n").last, "\(scenario) printed nothing")
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
        let json = try #require(object as? [String: Any])
        for key in ["scenario", "throughput_per_s", "latency_us", "errors"] {
            #expect(json[key] != nil, "\(scenario): no \(key) in \(line)")
        }
        let latency = try #require(json["latency_us"] as? [String: Any])
        for key in ["p50", "p90", "p99", "p999", "max"] { #expect(latency[key] != nil, "\(scenario): no latency_us.\(key)") }
        #expect(json["scenario"] as? String == scenario)
        let version = try SecurePushBinary.run(["--version"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(json["version"] as? String == version)
        let timestamp = try #require(json["timestamp"] as? String)
        #expect(ISO8601DateFormatter().date(from: timestamp) != nil, "\(timestamp)")
        #expect(json["connections"] is Int, "parameters are JSON numbers: \(line)")
        #expect(json["tls"] as? Bool == false)
        #expect((json["errors"] as? Double) == 0, "\(scenario): \(line)")
        #expect(((json["throughput_per_s"] as? Double) ?? 0) > 0, "\(scenario): \(line)")
        return json
    }
}
