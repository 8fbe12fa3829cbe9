#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushEventLoop
import PushProcess
import PushSession

/// The `nats-server` an embedded cluster run starts for its gateways: JetStream on, its
/// store in a directory of the bench's temporary tree, client and monitoring ports free
/// ports of 127.0.0.1. Debian's `nats-server` package installs it in /usr/sbin, which a
/// user's PATH often lacks, so that is looked in too.
final class NATSServerProcess {
    let child: ChildProcess
    /// Where the gateways connect: `nats://127.0.0.1:PORT`.
    let clientURL: String
    /// The HTTP monitoring endpoint (/varz, /healthz).
    let monitor: HostPort

    /// Directories searched after PATH.
    static let fallbackDirectories = ["/usr/sbin", "/usr/local/sbin"]
    static let missingAdvice = "install it with `apt-get install nats-server`"

    /// The command line after the executable: `-a 127.0.0.1 -p PORT -js -sd DIR -m MONPORT`.
    static func arguments(port: Int, monitorPort: Int, storeDirectory: String) -> [String] {
        ["-a", "127.0.0.1", "-p", "\(port)", "-js", "-sd", storeDirectory, "-m", "\(monitorPort)"]
    }

    /// The first executable `nats-server` in `path`'s directories, then in the fallbacks.
    static func locate(path: String?, fallbacks: [String] = fallbackDirectories,
                       isExecutable: (String) -> Bool = { access($0, X_OK) == 0 }) throws(BenchError) -> String {
        let directories = (path ?? "").split(separator: ":").map(String.init).filter { !$0.isEmpty } + fallbacks
        for directory in directories {
            let candidate = directory + "/nats-server"
            if isExecutable(candidate) { return candidate }
        }
        throw .setup("the gateway cluster needs nats-server, found neither on PATH nor in \(fallbacks.joined(separator: " or ")): "
                     + missingAdvice)
    }

    /// Starts it and waits until it serves clients with JetStream ready (/healthz says ok).
    init(storeDirectory: String) throws(BenchError) {
        let executable = try NATSServerProcess.locate(path: getenv("PATH").map { String(cString: $0) })
        let port = try freeLoopbackPort()
        let monitorPort = try freeLoopbackPort()
        monitor = HostPort(host: "127.0.0.1", port: monitorPort)
        clientURL = "nats://127.0.0.1:\(port)"
        child = try Children.spawn(executable, NATSServerProcess.arguments(port: port, monitorPort: monitorPort,
                                                                           storeDirectory: storeDirectory), name: "nats-server")
        do {
            try waitUntilHealthy(seconds: 20)
        } catch {
            child.terminate(graceSeconds: 5)
            throw error
        }
    }

    deinit { stop() }

    var pid: pid_t { child.pid }

    /// SIGTERM (nats-server shuts down cleanly on it), SIGKILL after the grace time. Idempotent.
    func stop() {
        child.terminate(graceSeconds: 10)
    }

    /// The server's message counters now; nil when the monitor does not answer.
    func counters() -> NATSCounters? {
        guard let body = try? LoopbackHTTP.get(monitor, path: "/varz") else { return nil }
        return NATSCounters(varz: body)
    }

    private func waitUntilHealthy(seconds: Double) throws(BenchError) {
        let deadline = Clocks.monotonicNanoseconds() + UInt64(seconds * 1e9)
        while true {
            if child.hasExited {
                throw .child("nats-server exited (status \(child.exitStatus ?? -1)) before it was ready: \(child.standardErrorTail)")
            }
            if let body = try? LoopbackHTTP.get(monitor, path: "/healthz"), body.contains("\"ok\"") { return }
            guard Clocks.monotonicNanoseconds() < deadline else {
                throw .timeout("nats-server did not report healthy within \(Int(seconds)) s: \(child.standardErrorTail)")
            }
            usleep(20_000)
        }
    }
}

/// The message counters of a nats-server's /varz: messages received from clients
/// (`in_msgs`) and delivered to subscribers (`out_msgs`), JetStream's own included.
struct NATSCounters: Equatable {
    var inMessages: UInt64
    var outMessages: UInt64

    /// The top-level `in_msgs` and `out_msgs` of /varz's JSON; nil if either is missing.
    init?(varz: String) {
        guard let inMessages = NATSCounters.number(named: "in_msgs", in: varz),
              let outMessages = NATSCounters.number(named: "out_msgs", in: varz) else { return nil }
        self.inMessages = inMessages
        self.outMessages = outMessages
    }

    init(inMessages: UInt64, outMessages: UInt64) {
        self.inMessages = inMessages
        self.outMessages = outMessages
    }

    /// The unsigned integer after the first `"NAME":` (the top-level key comes before any
    /// nested object of /varz that might reuse the name).
    static func number(named name: String, in json: String) -> UInt64? {
        let key = Array("\"\(name)\"".utf8)
        let bytes = Array(json.utf8)
        guard bytes.count > key.count else { return nil }
        var index = 0
        while index + key.count <= bytes.count {
            if bytes[index..<(index + key.count)].elementsEqual(key) {
                var position = index + key.count
                while position < bytes.count, bytes[position] == UInt8(ascii: " ") || bytes[position] == UInt8(ascii: "\t")
                    || bytes[position] == UInt8(ascii: "\n") || bytes[position] == UInt8(ascii: "\r") { position += 1 }
                guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                    index += 1
                    continue
                }
                position += 1
                while position < bytes.count, bytes[position] == UInt8(ascii: " ") || bytes[position] == UInt8(ascii: "\t") { position += 1 }
                var value: UInt64 = 0
                var digits = 0
                while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
                    let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
                    let (sum, overflowB) = times.addingReportingOverflow(UInt64(bytes[position] - UInt8(ascii: "0")))
                    guard !overflowA, !overflowB else { return nil }
                    value = sum
                    digits += 1
                    position += 1
                }
                return digits > 0 ? value : nil
            }
            index += 1
        }
        return nil
    }

    /// Messages per push over a window that began at `start`: in and out.
    func perPush(since start: NATSCounters, pushes: UInt64) -> (inbound: Double, outbound: Double)? {
        guard pushes > 0, inMessages >= start.inMessages, outMessages >= start.outMessages else { return nil }
        return (Double(inMessages - start.inMessages) / Double(pushes), Double(outMessages - start.outMessages) / Double(pushes))
    }
}
